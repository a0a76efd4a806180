#pragma once
#include <signal.h>

#include <atomic>
#include <thread>

// Ctrl-C on a terminal chat: SIGINT sets a flag instead of ending the process. The flag is
// read by the main thread (the reply being streamed is cancelled; at the prompt, the line being
// edited is dropped, the line editor's wait for a key ending: wait_for_input); SIGINT is blocked
// in every other thread so that the main thread is the one it wakes. So is SIGTSTP (Ctrl-Z),
// whose handlers at the prompt (the line editor's and WakeOnTerminalSignals') work on its state.
namespace strata::cli {

// Call before starting any thread: the threads started afterwards (the engine's workers,
// the scheduler) inherit SIGINT and SIGTSTP blocked.
void block_chat_signals();
// Installs the flag-setting handler (without SA_RESTART, so a pending read returns) and
// unblocks SIGINT and SIGTSTP in the calling thread.
void catch_sigint_here();
// Whether Ctrl-C was pressed since the last call; clears the flag.
bool take_interrupt();
// Whether Ctrl-Z stopped the prompt and it was continued, with the line not drawn again since;
// clears the flag.
bool take_continued();
// What waiting for input on the main thread ended with.
enum class Wait { Input, Interrupted, Signalled };
// Waits for `fd` to have input (or an error, for its read to report), for Ctrl-C (pressed since
// take_interrupt last cleared the flag, which stays set) or another signal; a stop and continue
// not yet taken (take_continued) returns Signalled at once. SIGINT and SIGTSTP are blocked while
// the flags are read and let through only inside the wait, so none comes unseen between them; a
// SIGINT still pending as the wait ends (come with a key, or raised again by the line editor's
// own handler) is taken before it returns.
Wait wait_for_input(int fd);
// While it lives (the prompt's line editor reading), SIGWINCH and SIGCONT have do-nothing
// handlers (other calls restarted), so that a terminal resized or continued wakes
// wait_for_input (Signalled) also after the line editor's one-shot handlers for them have put
// these back. SIGTSTP (Ctrl-Z) has one that stops the process with the terminal as the prompt
// found it and puts the editor's mode back once continued: the editor's own handler does so
// once a line, then puts this one back. Their actions before come back after; the reply's
// threads, which block these signals or never see them, do not run them.
class WakeOnTerminalSignals {
public:
    WakeOnTerminalSignals();
    ~WakeOnTerminalSignals();
    WakeOnTerminalSignals(const WakeOnTerminalSignals&) = delete;
    WakeOnTerminalSignals& operator=(const WakeOnTerminalSignals&) = delete;

private:
    struct sigaction winch_before_{}, cont_before_{}, stop_before_{};
};

// While it lives (the model loading, before the chat's handler is installed), Ctrl-C ends the
// process with status 130 and Ctrl-Z stops it, as they would anywhere else, instead of waiting
// in the blocked mask for the first prompt. Construct after block_chat_signals(): its thread
// takes the blocked signals.
class LeaveOnInterrupt {
public:
    LeaveOnInterrupt();
    ~LeaveOnInterrupt();
    LeaveOnInterrupt(const LeaveOnInterrupt&) = delete;
    LeaveOnInterrupt& operator=(const LeaveOnInterrupt&) = delete;

private:
    std::atomic<bool> done_{false};
    std::thread watcher_;
};

}  // namespace strata::cli
