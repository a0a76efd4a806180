// storage/io_fault: the STRATA_FAULT_IO syntax and how faults rewrite read results.
#include <catch2/catch.hpp>

#include <cerrno>

#include "core/error.h"
#include "storage/io_fault.h"

using namespace strata;
using namespace strata::storage;

TEST_CASE("fault specs parse eio:N, short:N and lost:N", "[unit][storage]") {
    CHECK(FaultSpec::parse("").kind == FaultKind::None);
    CHECK(FaultSpec::parse("none").kind == FaultKind::None);
    const FaultSpec e = FaultSpec::parse("eio:3");
    CHECK((e.kind == FaultKind::Eio && e.nth == 3));
    const FaultSpec s = FaultSpec::parse("short:1");
    CHECK((s.kind == FaultKind::Short && s.nth == 1));
    const FaultSpec l = FaultSpec::parse("lost:2");
    CHECK((l.kind == FaultKind::Lost && l.nth == 2));
    FaultInjector lost(l);
    CHECK(lost.filter(2, 4096, 512) == 4096);  // a lost read's result is not rewritten: it never arrives
    CHECK_FALSE(lost.loses(1));
    CHECK(lost.loses(2));
    CHECK_FALSE(lost.loses(2));  // once
    for (const char* bad : {"eio", "eio:", "eio:0", "eio:x", "short:-1", "enospc:2", "eio:2x"})
        CHECK_THROWS_AS(FaultSpec::parse(bad), UsageError);
}

TEST_CASE("faults fire once, on the Nth read", "[unit][storage]") {
    FaultInjector eio(FaultSpec{FaultKind::Eio, 2});
    CHECK(eio.filter(1, 4096, 512) == 4096);
    CHECK(eio.filter(2, 4096, 512) == -EIO);
    CHECK(eio.filter(2, 4096, 512) == 4096);
    CHECK(eio.filter(3, 4096, 512) == 4096);

    FaultInjector cut(FaultSpec{FaultKind::Short, 1});
    CHECK(cut.filter(1, 512, 512) == 512);    // one block cannot be cut: stays armed
    CHECK(cut.filter(2, 4096, 512) == 2048);  // half, on the granule
    CHECK(cut.fired());
    CHECK(cut.filter(3, 4096, 512) == 4096);
    FaultInjector none;
    CHECK(none.filter(1, -EIO, 1) == -EIO);  // real errors pass through
}
