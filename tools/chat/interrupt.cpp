#include "tools/chat/interrupt.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>

namespace strata::cli {

namespace {
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }
extern "C" void on_terminal_signal(int) {}

void set_sigint_mask(int how) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    pthread_sigmask(how, &set, nullptr);
}
}  // namespace

void block_sigint() { set_sigint_mask(SIG_BLOCK); }

void catch_sigint_here() {
    struct sigaction sa{};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: the terminal read returns, and the line editor with it
    sigaction(SIGINT, &sa, nullptr);
    set_sigint_mask(SIG_UNBLOCK);
}

bool take_interrupt() { return g_interrupted.exchange(false); }

Wait wait_for_input(int fd) {
    sigset_t sigint, before;
    sigemptyset(&sigint);
    sigaddset(&sigint, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigint, &before);
    sigset_t waiting = before;
    sigdelset(&waiting, SIGINT);  // let through only while waiting
    Wait got = Wait::Interrupted;
    if (!g_interrupted) {
        pollfd p{fd, POLLIN, 0};
        const int n = ppoll(&p, 1, nullptr, &waiting);
        got = n >= 0 || errno != EINTR ? Wait::Input : Wait::Signalled;
    }
    pthread_sigmask(SIG_SETMASK, &before, nullptr);  // a SIGINT still pending is taken here
    return g_interrupted ? Wait::Interrupted : got;
}

WakeOnTerminalSignals::WakeOnTerminalSignals() {
    struct sigaction sa{};
    sa.sa_handler = on_terminal_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // a wait (ppoll) returns all the same
    sigaction(SIGWINCH, &sa, &winch_before_);
    sigaction(SIGCONT, &sa, &cont_before_);
}

WakeOnTerminalSignals::~WakeOnTerminalSignals() {
    sigaction(SIGWINCH, &winch_before_, nullptr);
    sigaction(SIGCONT, &cont_before_, nullptr);
}

LeaveOnInterrupt::LeaveOnInterrupt()
    : watcher_([this] {
          sigset_t set;
          sigemptyset(&set);
          sigaddset(&set, SIGINT);
          const timespec tick{0, 50'000'000};  // how soon the destructor's join returns
          while (!done_) {
              if (sigtimedwait(&set, nullptr, &tick) == SIGINT) {
                  (void)!write(STDERR_FILENO, "\n", 1);
                  _exit(130);  // as SIGINT's default would
              }
          }
      }) {}

LeaveOnInterrupt::~LeaveOnInterrupt() {
    done_ = true;
    watcher_.join();
}

}  // namespace strata::cli
