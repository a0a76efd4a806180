#pragma once
// One conversation run on the shared scheduler. Each turn submits the whole rendered
// conversation; the scheduler reuses the KV of the prefix it already holds, so earlier turns
// are not recomputed. The reply streams to stdout from the scheduler's thread while the
// calling thread waits, and Ctrl-C (take_interrupt) cancels it.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "models/chat_template.h"
#include "runtime/engine.h"
#include "tools/chat/chat_file.h"

namespace strata::runtime { class Scheduler; }

namespace strata::cli {

// What one reply cost, from submit to done.
struct ReplyStats {
    int prompt_tokens = 0;  // the rendered conversation
    int cached_tokens = 0;  // of those, whose KV was reused
    int generated_tokens = 0;
    int decoded_tokens = 0;          // after the first, which comes from the prompt's pass
    int decode_passes = 0;           // the passes that decoded them (fewer where drafts were kept)
    double seconds = 0;              // submit to done
    double first_token_seconds = 0;  // submit to the first text: the prompt's evaluation
    std::string stop_reason;
};

class ChatSession {
public:
    ChatSession(runtime::Engine& engine, runtime::Scheduler& scheduler, models::ChatTemplate tmpl, std::string system, runtime::GenerateParams params);

    // Adds the user's message and streams the reply to stdout; returns the stop reason
    // ("cancelled" after Ctrl-C). Throws Error (the conversation is then as it was) when it
    // cannot be answered.
    std::string reply(const std::string& user);
    // Forgets the messages; the system prompt stays.
    void reset();
    // Last reply, overall, context use, template and plan, one per line.
    std::string stats_report() const;
    void save(const std::filesystem::path& path) const;
    // Replaces the conversation with a saved one (the session's is kept when it fails).
    void load(const std::filesystem::path& path);
    void restore(SavedChat saved, const std::string& source);
    size_t n_messages() const { return messages_.size(); }

private:
    std::vector<models::ChatMessage> conversation() const;  // the system prompt, then the messages in the context
    // Leaves the oldest messages out of the context (a whole exchange at a time, never the system
    // prompt) until the conversation with `extra` after it and `room` tokens more fits; the
    // conversation's tokens.
    size_t fit_context(const std::vector<models::ChatMessage>& extra, int room);
    void say_left_out(size_t n) const;  // n messages left out, said on stderr
    std::vector<int32_t> tokens(const std::vector<models::ChatMessage>& msgs) const;
    // Submits and waits, cancelling on Ctrl-C; the result of on_done.
    runtime::GenerateResult run(std::vector<int32_t> prompt, ReplyStats& stats);

    runtime::Engine& engine_;
    runtime::Scheduler& scheduler_;
    models::ChatTemplate tmpl_;
    std::string system_;
    runtime::GenerateParams params_;
    std::vector<models::ChatMessage> messages_;  // user and assistant turns
    size_t first_ = 0;                           // the first of them in the context; those before it are kept for /save
    int context_used_ = 0;               // tokens of the conversation after the last reply
    ReplyStats last_;
    ReplyStats total_;
    int n_replies_ = 0;
};

}  // namespace strata::cli
