// probe/machine_load: the CPU time other programs take while the probe measures, and the note
// that says a profile was measured on a busy machine.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "probe/machine_load.h"

using namespace strata::probe;

TEST_CASE("machine load: /proc/stat's cpu line read as busy and total ticks", "[unit]") {
    // user nice system idle iowait irq softirq steal guest guest_nice
    const auto t = parse_cpu_ticks("cpu  100 5 20 1000 30 2 3 40 7 0");
    REQUIRE(t);
    CHECK(t->busy == 100 + 5 + 20 + 2 + 3 + 40);  // guest time is inside user's: not added again
    CHECK(t->total == t->busy + 1000 + 30);
    CHECK_FALSE(parse_cpu_ticks("cpu0 1 2 3 4 5 6 7 8"));  // a single CPU's line
    CHECK_FALSE(parse_cpu_ticks("cpu 1 2 3"));
}

TEST_CASE("machine load: another process spinning counts, the note names the share", "[unit]") {
    const OtherLoad others;
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
        volatile unsigned spin = 0;
        while (std::chrono::steady_clock::now() < until) spin = spin + 1;
        ::_exit(0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    // The child had a core for most of its 400 ms, whatever else runs beside this test.
    CHECK(others.cores() > 0.3);
    CHECK(busy_machine_note(0.05, 2).empty());
    CHECK(busy_machine_note(0.2, 16).empty());  // a tenth of 16 CPUs is more
    CHECK_THAT(busy_machine_note(1.3, 2), Catch::Contains("1.3 of the 2 CPUs") && Catch::Contains("strata probe"));
}
