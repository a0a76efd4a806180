#include "tools/openai/batch_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "tools/openai/response.h"

namespace strata::openai {

namespace {
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
    if (!S_ISREG(st.st_mode)) return;
    // Read what an earlier run wrote; only whole lines count.
    std::string text;
    {
        std::ifstream in(path, std::ios::binary);
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    const size_t end = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (end < text.size()) {
        truncated_ = text.size() - end;
        if (::ftruncate(fd_, static_cast<off_t>(end)) != 0) throw io_error(path, "truncate");
        text.resize(end);
    }
    size_t line_no = 0;
    for (size_t pos = 0; pos < text.size();) {
        const size_t nl = text.find('\n', pos);
        const std::string_view line(text.data() + pos, nl - pos);
        pos = nl + 1;
        ++line_no;
        if (line.empty()) continue;
        const nlohmann::json rec = nlohmann::json::parse(line, nullptr, false);
        if (!rec.is_object()) {
            STRATA_LOG_WARN("batch: {} line {} is not a record; it is kept but ignored", path.string(), line_no);
            continue;
        }
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

void BatchOutput::append(const nlohmann::json& record) {
    const std::string line = dump(record) + "\n";
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
    if (::fdatasync(fd_) != 0) throw io_error(path_, "sync");
}

}  // namespace strata::openai
