#include "tools/chat/interrupt.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>

namespace strata::cli {

namespace {
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }
extern "C" void on_terminal_signal(int) {}

termios g_prompt_termios{};  // the terminal as the prompt found it, before the line editor's mode
std::atomic<bool> g_have_termios{false};
std::atomic<bool> g_continued{false};  // stopped by on_stop and continued, the line not drawn since

// SIGTSTP raised in the calling thread with it unblocked there (blocked again after): its
// action as it stands, the default stopping the process (or, in an orphaned process group,
// doing nothing) until continued.
void raise_stop_here() {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTSTP);
    pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
    raise(SIGTSTP);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
}

// Ctrl-Z at the prompt: the terminal back as the prompt found it when the line editor has it in
// its own mode, stopped with SIGTSTP's default action, then the editor's mode again once
// continued (the editor's own handler, one-shot, does this for the first Ctrl-Z of a line: the
// terminal then is already as found, and its SIGCONT handler puts the mode back). The line is
// drawn again by the prompt's wait (take_continued): the shell wrote over it.
extern "C" void on_stop(int) {
    const int saved_errno = errno;
    termios now{};
    const bool editing = g_have_termios && tcgetattr(STDIN_FILENO, &now) == 0 && !(now.c_lflag & ICANON);
    if (editing) tcsetattr(STDIN_FILENO, TCSADRAIN, &g_prompt_termios);
    struct sigaction stop_default{}, self{};
    stop_default.sa_handler = SIG_DFL;
    sigemptyset(&stop_default.sa_mask);
    sigaction(SIGTSTP, &stop_default, &self);
    raise_stop_here();
    sigaction(SIGTSTP, &self, nullptr);
    if (editing) tcsetattr(STDIN_FILENO, TCSADRAIN, &now);
    g_continued = true;
    errno = saved_errno;
}

void set_chat_signal_mask(int how) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTSTP);
    pthread_sigmask(how, &set, nullptr);
}
}  // namespace

void block_chat_signals() { set_chat_signal_mask(SIG_BLOCK); }

void catch_sigint_here() {
    struct sigaction sa{};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: the terminal read returns, and the line editor with it
    sigaction(SIGINT, &sa, nullptr);
    set_chat_signal_mask(SIG_UNBLOCK);
}

bool take_interrupt() { return g_interrupted.exchange(false); }

bool take_continued() { return g_continued.exchange(false); }

Wait wait_for_input(int fd) {
    sigset_t flagged, before;
    sigemptyset(&flagged);
    sigaddset(&flagged, SIGINT);
    sigaddset(&flagged, SIGTSTP);
    pthread_sigmask(SIG_BLOCK, &flagged, &before);
    sigset_t waiting = before;
    sigdelset(&waiting, SIGINT);  // let through only while waiting
    sigdelset(&waiting, SIGTSTP);
    Wait got = Wait::Interrupted;
    if (g_continued) {
        got = Wait::Signalled;  // stopped and continued outside the wait: the line is drawn again
    } else if (!g_interrupted) {
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
    g_have_termios = tcgetattr(STDIN_FILENO, &g_prompt_termios) == 0;
    sa.sa_handler = on_stop;
    sigaction(SIGTSTP, &sa, &stop_before_);
}

WakeOnTerminalSignals::~WakeOnTerminalSignals() {
    sigaction(SIGWINCH, &winch_before_, nullptr);
    sigaction(SIGCONT, &cont_before_, nullptr);
    sigaction(SIGTSTP, &stop_before_, nullptr);
    g_have_termios = false;
}

LeaveOnInterrupt::LeaveOnInterrupt()
    : watcher_([this] {
          sigset_t set;
          sigemptyset(&set);
          sigaddset(&set, SIGINT);
          sigaddset(&set, SIGTSTP);
          const timespec tick{0, 50'000'000};  // how soon the destructor's join returns
          while (!done_) {
              const int sig = sigtimedwait(&set, nullptr, &tick);
              if (sig == SIGTSTP) raise_stop_here();  // its default action, as outside the chat
              if (sig == SIGINT) {
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
