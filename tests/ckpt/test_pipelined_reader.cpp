// read_ranges (the pipelined reader behind the safetensors import): every byte of every range
// arrives once, in whole units and file order, for any chunk size, ring depth and I/O mode.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <stdexcept>

#include "ckpt/pipelined_reader.h"
#include "ckpt_test_util.h"
#include "core/error.h"

using namespace sof;
using namespace sof::test;

namespace {

std::vector<unsigned char> random_bytes(size_t n, uint32_t seed) {
    std::vector<unsigned char> v(n);
    uint32_t x = seed | 1u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v[i] = static_cast<unsigned char>(x >> 11);
    }
    return v;
}

std::string write_file(const std::string& path, const std::vector<unsigned char>& b) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return path;
}

// Reads `ranges` and checks every delivered piece against the file's bytes.
ckpt::ReadStats read_and_check(const std::string& path, const std::vector<unsigned char>& file,
                               const std::vector<ckpt::ByteRange>& ranges,
                               const ckpt::ReadOptions& o) {
    std::vector<std::vector<unsigned char>> got(ranges.size());
    uint64_t last_file_off = 0;
    const ckpt::ReadStats st = ckpt::read_ranges(
        path, ranges,
        [&](size_t i, uint64_t off, const unsigned char* p, size_t n) {
            const ckpt::ByteRange& r = ranges[i];
            REQUIRE(i < ranges.size());
            CHECK(n % r.unit == 0);
            CHECK(n > 0);
            CHECK(off == got[i].size());           // contiguous within the range
            CHECK(r.begin + off >= last_file_off); // file order across ranges
            last_file_off = r.begin + off + n;
            got[i].insert(got[i].end(), p, p + n);
        },
        o);
    for (size_t i = 0; i < ranges.size(); i++) {
        const ckpt::ByteRange& r = ranges[i];
        REQUIRE(got[i].size() == r.end - r.begin);
        if (!got[i].empty())
            CHECK(std::memcmp(got[i].data(), file.data() + r.begin, got[i].size()) == 0);
    }
    return st;
}

} // namespace

TEST_CASE("read_ranges: every range byte-exact for any chunk size, depth and I/O mode") {
    const std::string d = ckpt_scratch("pipelined_reader");
    const std::vector<unsigned char> file = random_bytes((size_t(5) << 20) + 1234, 7);
    const std::string path = write_file(d + "/data.bin", file);
    // given out of order; unaligned starts; gaps of 2 bytes (read through), 100 KiB (read
    // through) and 2 MiB (skipped); a range ending at the last byte of the file; an empty range
    std::vector<ckpt::ByteRange> ranges = {{3000001, 3000001 + 4 * 70001, 4, "c"},
                                           {10, 10 + 2 * 5000, 2, "a"},
                                           {10010 + 2, 10012 + 4 * 3, 4, "b"},
                                           {110000, 110000 + 999999, 1, "big"},
                                           {file.size() - 2 * 11, file.size(), 2, "tail"},
                                           {500, 500, 2, "empty"}};
    for (size_t chunk : {size_t(8192), size_t(65536), size_t(32) << 20})
        for (int buffers : {2, 3})
            for (bool direct : {false, true}) {
                CAPTURE(chunk);
                CAPTURE(buffers);
                CAPTURE(direct);
                ckpt::ReadOptions o;
                o.chunk_bytes = chunk;
                o.buffers = buffers;
                o.direct_io = direct;
                const ckpt::ReadStats st = read_and_check(path, file, ranges, o);
                // only the ranges, their 4 KiB alignment and the small gaps are read: the 2 MiB
                // hole before "c" and the file between the ranges' ends are not
                CHECK(st.bytes_read < file.size() - (size_t(2) << 20));
                if (!direct) CHECK_FALSE(st.direct_used);
            }
}

TEST_CASE("read_ranges: a file ending early and a failing consumer are clean errors") {
    const std::string d = ckpt_scratch("pipelined_reader_err");
    const std::vector<unsigned char> file = random_bytes(100000, 3);
    const std::string path = write_file(d + "/short.bin", file);
    for (bool direct : {false, true}) {
        ckpt::ReadOptions o;
        o.chunk_bytes = 16384;
        o.direct_io = direct;
        std::vector<ckpt::ByteRange> past = {{0, 50000, 2, "first"},
                                             {90000, 90000 + 4 * 5000, 4, "model.norm.weight"}};
        size_t delivered = 0;
        try {
            ckpt::read_ranges(
                path, past,
                [&](size_t, uint64_t, const unsigned char*, size_t n) { delivered += n; }, o);
            FAIL("no error for a range past the end of the file");
        } catch (const core::Error& e) {
            const std::string m = e.what();
            CHECK(m.find("short.bin") != std::string::npos);
            CHECK(m.find("model.norm.weight") != std::string::npos);
            CHECK(m.find("truncated") != std::string::npos);
        }
        CHECK(delivered >= 50000); // "first" arrived before the error

        // the consumer throws at the third piece: the reader stops, the exception comes back
        int pieces = 0;
        std::vector<ckpt::ByteRange> all = {{0, 100000, 1, "all"}};
        CHECK_THROWS_WITH_AS(ckpt::read_ranges(
                                 path, all,
                                 [&](size_t, uint64_t, const unsigned char*, size_t) {
                                     if (++pieces == 3) throw std::runtime_error("consumer");
                                 },
                                 o),
                             "consumer", std::runtime_error);
        CHECK(pieces == 3);
    }
    CHECK_THROWS_AS(ckpt::read_ranges(d + "/missing.bin", {{0, 8, 1, "x"}},
                                      [](size_t, uint64_t, const unsigned char*, size_t) {}),
                    core::Error);
}
