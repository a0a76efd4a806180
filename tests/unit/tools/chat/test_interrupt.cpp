// tools/chat/interrupt: the prompt's wait for a key ends with Ctrl-C however the signal falls
// against it (before the wait, during it, raised again by the line editor's handler), and wakes
// for a resize while the prompt's handlers for it live.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tools/chat/interrupt.h"

using namespace strata::cli;

namespace {

// As the line editor's own SIGINT handler does while it reads: puts the process's handler back
// and raises the signal again, which stays pending until the handler returns.
extern "C" void raise_again(int) {
    catch_sigint_here();
    raise(SIGINT);
}

// A pipe whose read end is waited on; the signal actions and mask the test found, restored
// when it ends.
struct Waited {
    int fds[2] = {-1, -1};
    struct sigaction sigint_before{};
    sigset_t mask_before{};
    Waited() {
        REQUIRE(pipe(fds) == 0);
        sigaction(SIGINT, nullptr, &sigint_before);
        pthread_sigmask(SIG_SETMASK, nullptr, &mask_before);
        catch_sigint_here();
        take_interrupt();
    }
    ~Waited() {
        sigaction(SIGINT, &sigint_before, nullptr);
        pthread_sigmask(SIG_SETMASK, &mask_before, nullptr);
        close(fds[0]);
        close(fds[1]);
    }
    // Writes a key after `after`, so that a wait that missed its signal ends as Input, not never.
    std::thread key_after(std::chrono::milliseconds after) {
        return std::thread([this, after] {
            std::this_thread::sleep_for(after);
            (void)!write(fds[1], "k", 1);
        });
    }
};

// `handler` for `signo`, not restarting calls.
void handle(int signo, void (*handler)(int)) {
    struct sigaction sa{};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(signo, &sa, nullptr);
}

// Sends `signo` to the calling thread from another, 50 ms from now (within its wait).
std::thread signal_soon(int signo) {
    const pthread_t waiting = pthread_self();
    return std::thread([waiting, signo] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        pthread_kill(waiting, signo);
    });
}

}  // namespace

TEST_CASE("chat interrupt: Ctrl-C pressed before the prompt's wait ends it at once", "[unit][chat]") {
    Waited w;
    std::thread key = w.key_after(std::chrono::seconds(2));
    raise(SIGINT);  // before the wait: a blocking read begun now would wait for the key
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(wait_for_input(w.fds[0]) == Wait::Interrupted);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
    CHECK(take_interrupt());
    key.join();
    CHECK(wait_for_input(w.fds[0]) == Wait::Input);  // the key, the flag spent
}

TEST_CASE("chat interrupt: Ctrl-C during the prompt's wait ends it; another signal wakes it", "[unit][chat]") {
    Waited w;
    std::thread key = w.key_after(std::chrono::seconds(2));
    std::thread ctrl_c = signal_soon(SIGINT);
    CHECK(wait_for_input(w.fds[0]) == Wait::Interrupted);
    ctrl_c.join();
    CHECK(take_interrupt());
    // A resize, while the prompt's handlers for it live: Signalled, no Ctrl-C. Sent until the wait
    // has ended: one that came before it would be spent.
    struct sigaction winch_before{}, winch_after{};
    sigaction(SIGWINCH, nullptr, &winch_before);
    {
        const WakeOnTerminalSignals prompt;
        const pthread_t waiting = pthread_self();
        std::atomic<bool> woken{false};
        std::thread resize([waiting, &woken] {
            while (!woken) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                if (!woken) pthread_kill(waiting, SIGWINCH);
            }
        });
        CHECK(wait_for_input(w.fds[0]) == Wait::Signalled);
        woken = true;
        resize.join();
    }
    CHECK_FALSE(take_interrupt());
    // Past the prompt a resize is what it was before (ignored): a reply's threads never see it.
    sigaction(SIGWINCH, nullptr, &winch_after);
    CHECK(winch_after.sa_handler == winch_before.sa_handler);
    key.join();
    CHECK(wait_for_input(w.fds[0]) == Wait::Input);
}

TEST_CASE("chat interrupt: Ctrl-C the line editor's handler raises again still ends the wait", "[unit][chat]") {
    Waited w;
    std::thread key = w.key_after(std::chrono::seconds(2));
    handle(SIGINT, raise_again);
    std::thread ctrl_c = signal_soon(SIGINT);
    // The wait wakes with the flag still clear, the signal raised again pending: it is taken
    // before the wait returns, which then says Interrupted, not another signal.
    CHECK(wait_for_input(w.fds[0]) == Wait::Interrupted);
    ctrl_c.join();
    CHECK(take_interrupt());
    key.join();
}
