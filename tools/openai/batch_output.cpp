#include "tools/openai/batch_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tools/openai/response.h"

namespace strata::openai {

namespace {
// A line as a batch run writes it: an object with "response" and "error" (one of them null).
bool is_record(std::string_view line) {
    const nlohmann::json rec = nlohmann::json::parse(line, nullptr, false);
    return rec.is_object() && rec.contains("response") && rec.contains("error");
}

IoError io_error(const std::filesystem::path& path, const char* what) {
    return IoError(fmt::format("cannot {} the output file '{}': {}", what, path.string(), std::strerror(errno)),
                   "check the path, its permissions and the free space");
}
}  // namespace

BatchOutput::BatchOutput(const std::filesystem::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) throw io_error(path, "open");
    // A pipe, a FIFO or a device (/dev/stdout, /dev/null) holds no earlier run to resume: reading
    // one would wait for ever or never end.
    struct stat st{};
    if (::fstat(fd_, &st) != 0) throw io_error(path, "inspect");
    regular_ = S_ISREG(st.st_mode);
    if (!regular_) return;
    // Read what an earlier run wrote; only whole lines count.
    std::string text;
    {
        std::ifstream in(path, std::ios::binary);
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    // Every line must be a record, the last one perhaps cut short in its write (it begins as a
    // record does): anything else is not an earlier run's output, and no line of it is ours to cut.
    size_t line_no = 0;
    for (size_t pos = 0; pos < text.size();) {
        const size_t nl = std::min(text.find('\n', pos), text.size());
        const std::string_view line(text.data() + pos, nl - pos);
        ++line_no;
        const bool last_unended = nl == text.size();
        pos = nl + 1;
        if (line.empty() || is_record(line) || (last_unended && line.starts_with("{\""))) continue;
        throw UsageError(fmt::format("'{}' is not the output of a batch run: its line {} is not a record", path.string(), line_no),
                         "give -o a new file, or one an earlier `strata batch` wrote");
    }
    const size_t end = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (end < text.size()) {
        if (is_record(std::string_view(text).substr(end))) {
            append_line("\n");  // a whole record whose line break is missing (an editor dropped it)
            text += '\n';
        } else {  // a partial record left by a run killed in its write
            truncated_ = text.size() - end;
            if (::ftruncate(fd_, static_cast<off_t>(end)) != 0) throw io_error(path, "truncate");
            text.resize(end);
        }
    }
    line_no = 0;
    for (size_t pos = 0; pos < text.size();) {
        const size_t nl = text.find('\n', pos);
        const std::string_view line(text.data() + pos, nl - pos);
        pos = nl + 1;
        ++line_no;
        if (line.empty()) continue;
        const nlohmann::json rec = nlohmann::json::parse(line, nullptr, false);
        const auto id = rec.find("custom_id");
        if (id != rec.end() && id->is_string()) {
            ids_.insert(id->get<std::string>());
            continue;
        }
        // An error record of an input line without a custom_id names that line.
        const auto error = rec.find("error");
        if (error == rec.end() || !error->is_object()) continue;
        const auto input_line = error->find("line");
        if (input_line != error->end() && input_line->is_number_unsigned() && input_line->get<size_t>() > 0)
            lines_.insert(input_line->get<size_t>());
    }
}

BatchOutput::~BatchOutput() {
    if (fd_ >= 0) ::close(fd_);
}

bool BatchOutput::answered(const std::optional<std::string>& custom_id, size_t line_no) const {
    return custom_id ? ids_.count(*custom_id) > 0 : lines_.count(line_no) > 0;
}

void BatchOutput::append(const nlohmann::json& record) { append_line(dump(record) + "\n"); }

void BatchOutput::append_line(std::string_view line) {
    // O_APPEND and one write for the whole line: a kill leaves whole lines, or at worst a
    // partial last one that the next open cuts off.
    size_t done = 0;
    while (done < line.size()) {
        const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw io_error(path_, "write");
        done += static_cast<size_t>(n);
    }
}

void BatchOutput::sync() {
    // A pipe or device (/dev/stdout) has nothing to make durable, and fdatasync refuses it.
    if (regular_ && ::fdatasync(fd_) != 0) throw io_error(path_, "sync");
}

}  // namespace strata::openai
