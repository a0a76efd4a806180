#include "tools/chat/chat_session.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "models/chat_prompt.h"
#include "planner/plan_report.h"
#include "runtime/place/placement.h"
#include "runtime/scheduler.h"
#include "tools/chat/chat_file.h"
#include "tools/chat/interrupt.h"
#include "tools/chat/reply_printer.h"

namespace strata::cli {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0, Clock::time_point t1) { return std::chrono::duration<double>(t1 - t0).count(); }

double rate(double n, double seconds) { return seconds > 0 ? n / seconds : 0; }
}  // namespace

ChatSession::ChatSession(runtime::Engine& engine, runtime::Scheduler& scheduler, models::ChatTemplate tmpl, std::string system, runtime::GenerateParams params)
    : engine_(engine), scheduler_(scheduler), tmpl_(std::move(tmpl)), system_(std::move(system)), params_(std::move(params)) {
    params_.stop.push_back(tmpl_.end_of_turn());
    // A system prompt the context cannot hold would refuse every message, and /reset keeps it.
    if (!system_.empty())
        if (const size_t n = tokens(conversation()).size(); n >= static_cast<size_t>(engine_.n_ctx()))
            throw UsageError(fmt::format("the system prompt is {} tokens, and the context holds {}", n, engine_.n_ctx()),
                             "shorten --system, or give a larger --ctx");
}

std::vector<models::ChatMessage> ChatSession::conversation() const {
    return with_system(system_, {messages_.begin() + static_cast<std::ptrdiff_t>(first_), messages_.end()});
}

size_t ChatSession::fit_context(const std::vector<models::ChatMessage>& extra, int room) {
    const auto rendered = [&] {
        auto msgs = conversation();
        msgs.insert(msgs.end(), extra.begin(), extra.end());
        return tokens(msgs).size();
    };
    size_t n = rendered();
    while (n + size_t(room) > size_t(engine_.n_ctx()) && first_ < messages_.size()) {
        // An exchange at a time: the context starts at a user's message.
        do ++first_;
        while (first_ < messages_.size() && messages_[first_].role != "user");
        n = rendered();
    }
    return n;
}

void ChatSession::say_left_out(size_t n) const {
    if (n > 0) std::fprintf(stderr, "(%zu older messages are left out of the context to make room; /save keeps them)\n", n);
}

std::vector<int32_t> ChatSession::tokens(const std::vector<models::ChatMessage>& msgs) const {
    return models::tokenize_chat(engine_.tokenizer(), tmpl_, msgs);
}

std::string ChatSession::reply(const std::string& user) {
    // A conversation past the context goes on without its oldest exchanges, leaving the reply a
    // quarter of the context (or the -n it asks for, where that is less).
    const int n_ctx = engine_.n_ctx();
    const int room = params_.n_predict > 0 ? std::min(params_.n_predict, n_ctx / 4) : n_ctx / 4;
    const size_t first_before = first_;
    const size_t fitted = fit_context({{"user", user}}, room);
    auto msgs = conversation();
    msgs.push_back({"user", user});
    std::vector<int32_t> prompt = tokens(msgs);
    const int n_prompt = static_cast<int>(prompt.size());
    if (n_prompt >= n_ctx) {
        first_ = first_before;  // the conversation is as it was
        throw UsageError(fmt::format("the message is {} tokens with the system prompt, and the context holds {}", fitted, n_ctx),
                         "shorten the message, or give a larger --ctx");
    }
    say_left_out(first_ - first_before);

    ReplyStats st;
    const runtime::GenerateResult r = run(std::move(prompt), st);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (r.stop_reason == "error")
        throw Error(fmt::format("the reply failed: {}", r.error), "the conversation is as it was; try again, or /reset");
    // Stopped within the prompt's pass: nothing was said, so the message is dropped, and the
    // cut pass is left out of /stats (its tokens were not all evaluated).
    if (r.stop_reason == "cancelled" && st.generated_tokens == 0) {
        std::fputs("(stopped before the reply began; the message is dropped)\n", stderr);
        return r.stop_reason;
    }

    last_ = st;
    total_.prompt_tokens += st.prompt_tokens;
    total_.cached_tokens += st.cached_tokens;
    total_.generated_tokens += st.generated_tokens;
    total_.decoded_tokens += st.decoded_tokens;
    total_.decode_passes += st.decode_passes;
    total_.seconds += st.seconds;
    total_.first_token_seconds += st.first_token_seconds;
    ++n_replies_;
    if (r.stop_reason == "cancelled") std::fputs("(stopped)\n", stderr);
    if (r.stop_reason == "context" || n_prompt + st.generated_tokens >= engine_.n_ctx())
        std::fputs("(the context is full: the next message leaves the oldest ones out; a larger --ctx holds more)\n", stderr);
    messages_.push_back({"user", user});
    messages_.push_back({"assistant", r.text});
    context_used_ = n_prompt + st.generated_tokens;
    return r.stop_reason;
}

runtime::GenerateResult ChatSession::run(std::vector<int32_t> prompt, ReplyStats& st) {
    struct Turn {
        std::mutex mu;
        std::condition_variable cv;
        bool done = false;
        runtime::GenerateResult result;
        std::optional<Clock::time_point> first_text;  // written on the scheduler's thread before done
        ReplyPrinter printer;
        explicit Turn(ReplyPrinter p) : printer(std::move(p)) {}
    };
    auto turn = std::make_shared<Turn>(ReplyPrinter(tmpl_, isatty(STDOUT_FILENO) != 0));
    st.prompt_tokens = static_cast<int>(prompt.size());

    runtime::Request req;
    req.params = params_;
    // Never ask for more than the context has left, so that a long conversation still gets
    // the reply that fits.
    req.params.n_predict = std::min(req.params.n_predict, engine_.n_ctx() - st.prompt_tokens);
    req.prompt = std::move(prompt);
    req.on_text = [turn](std::string_view text) {
        if (!turn->first_text) turn->first_text = Clock::now();
        turn->printer.write(text);  // kept as drawn in the conversation
        return true;
    };
    req.on_done = [turn](const runtime::GenerateResult& r) {
        std::lock_guard lock(turn->mu);
        turn->result = r;
        turn->done = true;
        turn->cv.notify_all();
    };

    const auto t0 = Clock::now();
    const uint64_t id = scheduler_.submit(std::move(req));
    std::unique_lock lock(turn->mu);
    bool cancelled = false;
    while (!turn->done) {
        // Polled rather than signalled: a signal handler may only set a flag.
        turn->cv.wait_for(lock, std::chrono::milliseconds(50));
        if (!cancelled && take_interrupt()) {
            cancelled = true;
            lock.unlock();
            scheduler_.cancel(id);
            lock.lock();
        }
    }
    turn->printer.finish();
    const auto t1 = Clock::now();
    const runtime::GenerateResult& r = turn->result;
    st.cached_tokens = r.cached_tokens;
    st.generated_tokens = static_cast<int>(r.tokens.size());
    st.decoded_tokens = std::max(0, st.generated_tokens - 1);
    st.decode_passes = r.n_decode_evals;
    st.seconds = seconds_since(t0, t1);
    st.first_token_seconds = turn->first_text ? seconds_since(t0, *turn->first_text) : st.seconds;
    st.stop_reason = r.stop_reason;
    return r;
}

void ChatSession::reset() {
    messages_.clear();
    first_ = 0;
    context_used_ = 0;
}

std::string ChatSession::stats_report() const {
    // Generation speed counts the tokens after the first, whose time is the prompt's (as
    // `strata generate` and llama.cpp count it); prompt speed counts the tokens evaluated.
    const auto generation = [](const ReplyStats& s) {
        return fmt::format("{} tokens in {:.2f} s, {:.1f} tokens/s, {:.2f} tokens a pass", s.generated_tokens, s.seconds,
                           rate(s.decoded_tokens, s.seconds - s.first_token_seconds), rate(s.decoded_tokens, s.decode_passes));
    };
    const auto prompt = [](const ReplyStats& s) {
        const int n_new = s.prompt_tokens - s.cached_tokens;
        return fmt::format("{} tokens, {} cached, {} new, {:.1f} tokens/s", s.prompt_tokens, s.cached_tokens, n_new,
                           rate(n_new, s.first_token_seconds));
    };
    std::string out;
    if (n_replies_ == 0) {
        out += "last reply: none yet\n";
    } else {
        out += fmt::format("last reply: {} (first after {:.2f} s; {})\n", generation(last_), last_.first_token_seconds,
                           last_.stop_reason);
        out += fmt::format("prompt:     {}\n", prompt(last_));
    }
    out += fmt::format("overall:    {} {}, {}; prompts {}\n", n_replies_, n_replies_ == 1 ? "reply" : "replies", generation(total_),
                       prompt(total_));
    out += fmt::format("context:    {} / {} tokens ({} messages{})\n", context_used_, engine_.n_ctx(), messages_.size() - first_,
                       first_ ? fmt::format("; {} older ones left out", first_) : "");
    out += fmt::format("template:   {}\n", models::chat_family_name(tmpl_.family()));
    // The plan priced for the last reply (it was placed for a prompt filling the context).
    const std::shared_ptr<const runtime::Placement> running = engine_.running_placement();
    planner::Plan priced = running->plan;
    if (n_replies_ > 0) priced.prediction = running->predict(last_.prompt_tokens, std::max(1, last_.generated_tokens));
    out += planner::plan_summary(priced) + "\n";
    return out;
}

void ChatSession::save(const std::filesystem::path& path) const {
    save_chat(path, {std::string(models::chat_family_name(tmpl_.family())), system_, messages_});
}

void ChatSession::load(const std::filesystem::path& path) { restore(load_chat(path), path.string()); }

void ChatSession::restore(SavedChat saved, const std::string& source) {
    // Its system prompt must fit; older messages past the context are left out of it as a reply's are.
    if (const size_t n = tokens(with_system(saved.system, {})).size(); n >= static_cast<size_t>(engine_.n_ctx()))
        throw UsageError(fmt::format("'{}' has a system prompt of {} tokens in this model's template, and the context holds {}",
                                     source, n, engine_.n_ctx()),
                         "raise --ctx");
    const std::string_view family = models::chat_family_name(tmpl_.family());
    if (!saved.template_name.empty() && saved.template_name != family)
        std::fprintf(stderr, "(saved with the %s template; rendered with this model's %s)\n", saved.template_name.c_str(),
                     std::string(family).c_str());
    system_ = std::move(saved.system);
    messages_ = std::move(saved.messages);
    first_ = 0;
    context_used_ = static_cast<int>(fit_context({}, 0));
    say_left_out(first_);
}

}  // namespace strata::cli
