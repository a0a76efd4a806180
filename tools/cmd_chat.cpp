// `strata chat`: a conversation in the model's chat template, run on the scheduler. On a
// terminal it is interactive (tools/chat/: line editing and history, slash commands, Ctrl-C
// stops a reply); otherwise standard input is one user message and the reply is printed.
#include <unistd.h>

#include <cstdio>
#include <optional>

#include "core/cache_dir.h"
#include "core/error.h"
#include "core/log.h"
#include "core/model_paths.h"
#include "models/chat_reasoning.h"
#include "models/gguf_file.h"
#include "runtime/scheduler.h"
#include "tools/chat/chat_commands.h"
#include "tools/chat/chat_file.h"
#include "tools/chat/chat_session.h"
#include "tools/chat/interrupt.h"
#include "tools/chat/line_input.h"
#include "tools/cli_options.h"
#include "tools/progress.h"

namespace strata::cli {

namespace {

std::string stdin_message() {
    if (isatty(STDIN_FILENO)) throw UsageError("no message on standard input", "pipe the message in: echo hi | strata chat ...");
    std::string msg = read_stdin();
    if (msg.empty()) throw UsageError("standard input is empty", "pipe a message in, or run on a terminal to chat");
    return msg;
}

// The conversation --load names, with --system's prompt where it has none of its own (where it
// has, that one stays, and --system is said to be unused).
SavedChat loaded_chat(const ChatOptions& o) {
    SavedChat chat = load_chat(o.load);
    if (chat.system.empty()) chat.system = o.system;
    else if (!o.system.empty() && o.system != chat.system)
        STRATA_LOG_WARN("--system is not used: {} has a system prompt of its own", o.load);
    return chat;
}

// The model's chat template (--chat-template's family), its reasoning off with --no-think
// (`warn`: saying so where the template cannot: once a run).
models::ChatTemplate chat_template(const ChatOptions& o, const models::GgufFile& file, bool warn) {
    const models::ChatTemplate tmpl = models::ChatTemplate::from_gguf(file, o.chat_template);
    if (!o.no_think) return tmpl;
    if (warn && !tmpl.can_stop_thinking())
        STRATA_LOG_WARN("--no-think is not used: the {} template has no way to turn the model's reasoning off",
                        models::chat_family_name(tmpl.family()));
    return tmpl.without_thinking();
}

// The text the model reads for `msg` after the conversation so far (--load's, else none); without
// `msg`, the conversation alone, as the next reply's prompt begins. From the GGUF header alone
// (no weights are loaded).
std::string rendered_prompt(const ChatOptions& o, const std::optional<SavedChat>& saved, const std::optional<std::string>& msg,
                            bool warn) {
    SavedChat chat = saved ? *saved : SavedChat{{}, o.system, {}};
    const models::GgufFile file = models::GgufFile::open(resolve_model_path(o.m.model), /*map_data=*/false);
    const models::ChatTemplate tmpl = chat_template(o, file, warn);
    if (msg) chat.messages.push_back({"user", *msg});
    return tmpl.render(with_system(chat.system, chat.messages), /*add_generation_prompt=*/msg.has_value());
}

// --print-prompt: the text the model would read for stdin's message.
int print_prompt(const ChatOptions& o) {
    const std::string msg = stdin_message();
    const std::string prompt = rendered_prompt(o, o.load.empty() ? std::nullopt : std::optional(loaded_chat(o)), msg, /*warn=*/true);
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    return 0;
}

void print_error(const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    if (const auto* err = dynamic_cast<const Error*>(&e); err && !err->hint().empty())
        std::fprintf(stderr, "  hint: %s\n", err->hint().c_str());
}

int chat_loop(ChatSession& session) {
    std::fputs("strata chat: type a message; /help lists the commands. Ctrl-C stops a reply, Ctrl-D leaves.\n", stderr);
    LineInput input(cache_dir() / "chat_history");
    bool after_interrupt = false;  // a second Ctrl-C in a row at the prompt leaves
    for (;;) {
        const LineInput::Result in = input.read_message();
        if (in.status == LineInput::Status::EndOfInput) break;
        if (in.status == LineInput::Status::Interrupted) {
            if (after_interrupt) break;
            std::fputs("(Ctrl-C again or Ctrl-D leaves)\n", stderr);
            after_interrupt = true;
            continue;
        }
        after_interrupt = false;
        try {
            if (is_chat_command(in.text)) {
                if (!run_chat_command(session, in.text)) break;
            } else {
                after_interrupt = session.reply(in.text) == "cancelled";
            }
        } catch (const std::exception& e) {
            print_error(e);
        }
    }
    std::fputc('\n', stdout);
    return 0;
}

}  // namespace

int run_chat(const ChatOptions& o) {
    if (o.print_prompt) return print_prompt(o);
    const bool interactive = isatty(STDIN_FILENO);
    const std::string message = interactive ? std::string() : stdin_message();
    std::optional<SavedChat> saved;  // read before the model loads, so that a bad file fails fast
    if (!o.load.empty()) saved = loaded_chat(o);
    if (interactive) block_chat_signals();  // before the engine's and the scheduler's threads start
    std::optional<LeaveOnInterrupt> leave_while_loading;
    if (interactive) leave_while_loading.emplace();

    runtime::EngineOptions eo = o.m.engine();
    eo.n_predict = tokens_to_generate(o.n_predict);  // the plan's workload
    // Piped, the one message is known before the plan is made: planned for it, as generate plans
    // for its prompt; on a terminal, for a turn after the conversation --load names, which the
    // first reply reads whole (unless --plan-prompt names another length).
    if (o.m.plan_prompt == 0 && !interactive) eo.prompt = rendered_prompt(o, saved, message, /*warn=*/false);
    if (o.m.plan_prompt == 0 && interactive) {
        eo.n_prompt = ModelOptions::kTurnPrompt;
        if (saved) eo.prompt = rendered_prompt(o, saved, std::nullopt, /*warn=*/false);
    }
    announce_loading(eo.model);
    runtime::Engine engine(eo);
    runtime::SchedulerOptions so;
    so.max_batch = 1;  // one conversation
    const auto draft = o.m.load_draft_model(engine);
    so.spec = o.m.spec_options(draft.get());
    runtime::Scheduler scheduler(engine, so);
    models::ChatTemplate tmpl = chat_template(o, engine.file(), /*warn=*/true);
    runtime::GenerateParams gp;
    gp.n_predict = eo.n_predict;
    gp.sampler = o.sampler;
    gp.reasoning_budget = o.reasoning_budget;
    gp.reasoning_budget.style = models::reasoning_style(tmpl);
    if (o.reasoning_budget.tokens >= 0 && !gp.reasoning_budget.style)
        STRATA_LOG_WARN("--reasoning-budget is not used: the {} template's model answers without reasoning first",
                        models::chat_family_name(tmpl.family()));
    ChatSession session(engine, scheduler, std::move(tmpl), o.system, gp);
    if (saved) session.restore(std::move(*saved), o.load);

    if (!interactive) {
        session.reply(message);
        return 0;
    }
    leave_while_loading.reset();
    catch_sigint_here();
    return chat_loop(session);
}

}  // namespace strata::cli
