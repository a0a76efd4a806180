// `strata chat`: a conversation in the model's chat template. On a terminal it is
// interactive (line editing, history, Ctrl-C stops a reply); otherwise standard input is one
// user message and the reply is printed. Each turn reuses the KV cache of the turns before.
#include <editline/readline.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>

#include "models/chat_prompt.h"
#include "runtime/core/error.h"
#include "tools/cli_options.h"

namespace strata::cli {

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

class Conversation {
public:
    Conversation(Engine& engine, const ChatOptions& o)
        : engine_(engine), tmpl_(ChatTemplate::from_gguf(engine.file(), o.chat_template)), opts_(o) {
        if (!o.system.empty()) messages_.push_back({"system", o.system});
    }

    // Adds the user's message, streams the reply to stdout and records it.
    void reply(const std::string& user) {
        messages_.push_back({"user", user});
        auto ids = tokenize_chat(engine_.tokenizer(), tmpl_, messages_);

        // Reuse the cached prefix shared with the previous turns.
        size_t keep = 0;
        while (keep < cached_.size() && keep < ids.size() && cached_[keep] == ids[keep]) ++keep;
        if (keep == ids.size()) --keep;  // at least one token must be evaluated for fresh logits
        engine_.truncate(static_cast<int>(keep));

        GenerateParams gp;
        gp.n_predict = opts_.n_predict;
        gp.sampler = opts_.sampler;
        gp.stop = {tmpl_.end_of_turn()};
        g_interrupted = false;
        auto r = engine_.generate(std::span(ids).subspan(keep), gp, [](std::string_view s) {
            std::fwrite(s.data(), 1, s.size(), stdout);
            std::fflush(stdout);
            return !g_interrupted.load();
        });
        std::fputc('\n', stdout);
        messages_.push_back({"assistant", r.text});
        cached_ = ids;
        cached_.insert(cached_.end(), r.tokens.begin(), r.tokens.end());
        cached_.resize(std::min<size_t>(cached_.size(), engine_.n_past()));
    }

    void reset() {
        messages_.erase(std::remove_if(messages_.begin(), messages_.end(),
                                       [](const ChatMessage& m) { return m.role != "system"; }),
                        messages_.end());
        cached_.clear();
        engine_.reset();
    }

private:
    Engine& engine_;
    ChatTemplate tmpl_;
    const ChatOptions& opts_;
    std::vector<ChatMessage> messages_;
    std::vector<int32_t> cached_;  // the tokens whose KV the engine holds
};

}  // namespace

int run_chat(const ChatOptions& o) {
    Engine engine(o.m.engine());
    Conversation chat(engine, o);

    if (!isatty(STDIN_FILENO)) {
        const std::string msg = read_stdin();
        if (msg.empty()) throw UsageError("standard input is empty", "pipe a message in, or run on a terminal to chat");
        chat.reply(msg);
        return 0;
    }

    std::signal(SIGINT, on_sigint);
    std::fprintf(stderr, "strata chat: type a message; /reset starts over, /exit or Ctrl-D leaves, Ctrl-C stops a reply.\n");
    while (char* line = readline("> ")) {
        std::string msg(line);
        std::free(line);
        if (msg.empty()) continue;
        add_history(msg.c_str());
        if (msg == "/exit" || msg == "/quit") break;
        if (msg == "/reset") {
            chat.reset();
            std::fprintf(stderr, "(conversation cleared)\n");
            continue;
        }
        chat.reply(msg);
    }
    return 0;
}

}  // namespace strata::cli
