#pragma once
// The output file of `strata batch`, written so that a run can be resumed: every record is
// one write() of a whole line, synced to disk as it goes; reopening cuts off a partial last
// line left by a killed run and remembers which requests are already answered.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace strata::openai {

class BatchOutput {
public:
    // Opens `path` for appending, creating it, and reads the records an earlier run left there (a
    // regular file's: a pipe, FIFO or device is written only); throws IoError when it cannot, and
    // UsageError for a file holding lines that are not records (not an earlier run's output).
    explicit BatchOutput(const std::filesystem::path& path);
    ~BatchOutput();
    BatchOutput(const BatchOutput&) = delete;
    BatchOutput& operator=(const BatchOutput&) = delete;

    // Whether an earlier run answered this request: by custom_id, or by input line for
    // error records of lines without one.
    bool answered(const std::optional<std::string>& custom_id, size_t line_no) const;
    size_t n_answered() const { return ids_.size() + lines_.size(); }
    // Bytes of a partial last line that reopening cut off (0 for a clean file).
    size_t truncated_bytes() const { return truncated_; }

    // Appends one record as one line; throws IoError on a failed write.
    void append(const nlohmann::json& record);
    // Makes what was appended durable (in a regular file).
    void sync();

private:
    void append_line(std::string_view line);

    std::filesystem::path path_;
    int fd_ = -1;
    std::set<std::string> ids_;
    std::set<size_t> lines_;
    size_t truncated_ = 0;
    bool regular_ = false;
};

}  // namespace strata::openai
