#pragma once
// The user's messages on a terminal: libedit line editing, history kept across sessions in
// the cache folder, and messages over several lines — a line ending in `\` continues on the
// next, a line starting with `"""` opens a block that a line ending in `"""` closes, and
// lines pasted at once are one message.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace strata::cli {

// Joins typed lines into one message by the rules above.
class MessageAssembler {
public:
    // Adds one typed line; returns true when it completes the message.
    bool feed(std::string_view line);
    // Adds a line that more pasted text follows: part of the message whatever it ends with.
    void feed_pasted(std::string_view line);
    // A message has been started and not completed.
    bool pending() const { return block_ || !lines_.empty(); }
    // The completed message (lines joined with '\n'); starts the next one.
    std::string take();
    void clear();

private:
    std::vector<std::string> lines_;
    bool block_ = false;
};

class LineInput {
public:
    // Loads the history from `history_file` (kept there after each message).
    explicit LineInput(std::filesystem::path history_file);

    enum class Status { Message, Interrupted, EndOfInput };
    struct Result {
        Status status;
        std::string text;  // the message, when status is Message
    };
    // Blocks until a whole message is typed, Ctrl-C (the partial message is dropped) or Ctrl-D.
    Result read_message();

private:
    std::filesystem::path history_file_;
    MessageAssembler assembler_;
    bool history_warned_ = false;  // a history that cannot be written is said once
};

}  // namespace strata::cli
