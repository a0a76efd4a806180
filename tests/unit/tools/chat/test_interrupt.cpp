// tools/chat/interrupt: the prompt's wait for a key ends with Ctrl-C however the signal falls
// against it, before the wait or during it, and wakes for other signals (a resize).
#include <catch2/catch.hpp>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tools/chat/interrupt.h"

using namespace strata::cli;

namespace {

extern "C" void ignore_signal(int) {}

// A pipe whose read end is waited on, and the SIGINT and SIGUSR1 actions the test found,
// restored when it ends.
struct Waited {
    int fds[2] = {-1, -1};
    struct sigaction sigint_before{}, usr1_before{};
    Waited() {
        REQUIRE(pipe(fds) == 0);
        sigaction(SIGINT, nullptr, &sigint_before);
        sigaction(SIGUSR1, nullptr, &usr1_before);
        catch_sigint_here();
        take_interrupt();
    }
    ~Waited() {
        sigaction(SIGINT, &sigint_before, nullptr);
        sigaction(SIGUSR1, &usr1_before, nullptr);
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
    const pthread_t waiting = pthread_self();
    std::thread ctrl_c([waiting] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        pthread_kill(waiting, SIGINT);
    });
    CHECK(wait_for_input(w.fds[0]) == Wait::Interrupted);
    ctrl_c.join();
    CHECK(take_interrupt());
    // A resize's signal (SIGUSR1 here, caught without restarting): Signalled, no Ctrl-C.
    struct sigaction sa{};
    sa.sa_handler = ignore_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, nullptr);
    std::thread resize([waiting] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        pthread_kill(waiting, SIGUSR1);
    });
    CHECK(wait_for_input(w.fds[0]) == Wait::Signalled);
    resize.join();
    CHECK_FALSE(take_interrupt());
    key.join();
    CHECK(wait_for_input(w.fds[0]) == Wait::Input);
}
