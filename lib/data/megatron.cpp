// Megatron-LM indexed datasets (see megatron.h): the .idx header and arrays validated in constant
// memory, the .bin's tokens of any integer dtype as ids checked against the vocabulary.
#include "data/megatron.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/input_file.h"
#include "core/strfmt.h"

namespace sof::data {

namespace {

constexpr int64_t kChunk = int64_t(1) << 20; // entries / tokens per read

template <typename T> T from_le(T v) {
    if constexpr (std::endian::native == std::endian::big) {
        T r{};
        auto* s = reinterpret_cast<const unsigned char*>(&v);
        auto* d = reinterpret_cast<unsigned char*>(&r);
        for (size_t i = 0; i < sizeof(T); i++)
            d[i] = s[sizeof(T) - 1 - i];
        return r;
    }
    return v;
}

// entries [0, count) of a little-endian array at `offset` of a file, read kChunk at a time; at()
// is fast for indexes that (mostly) increase
template <typename T> class ChunkedArray {
  public:
    ChunkedArray(const core::InputFile& f, uint64_t offset, int64_t count)
        : f_(f), offset_(offset), count_(count) {}
    T at(int64_t i) {
        if (i < lo_ || i >= lo_ + static_cast<int64_t>(buf_.size())) {
            lo_ = i;
            buf_.resize(static_cast<size_t>(std::min(kChunk, count_ - i)));
            f_.read_at(buf_.data(), buf_.size() * sizeof(T), offset_ + uint64_t(i) * sizeof(T));
        }
        return from_le(buf_[static_cast<size_t>(i - lo_)]);
    }

  private:
    const core::InputFile& f_;
    uint64_t offset_;
    int64_t count_;
    int64_t lo_ = 0;
    std::vector<T> buf_;
};

template <typename T> T load_le(const unsigned char* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return from_le(v);
}

// Converts n tokens of type T at raw to ints (out may be null: check only). Returns the index of
// the first id outside [0, vocab), or -1; *bad gets its value.
template <typename T>
int64_t convert(const unsigned char* raw, int64_t n, int vocab, int* out, long long* bad) {
    T lo = std::numeric_limits<T>::max(), hi = std::numeric_limits<T>::lowest();
    for (int64_t i = 0; i < n; i++) { // branch-free min/max (vectorized)
        const T v = load_le<T>(raw + i * int64_t(sizeof(T)));
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        if (out) out[i] = static_cast<int>(v); // in range when the check below passes
    }
    if (n == 0 || (static_cast<long long>(lo) >= 0 && static_cast<long long>(hi) < vocab))
        return -1;
    for (int64_t i = 0; i < n; i++) {
        const long long v = static_cast<long long>(load_le<T>(raw + i * int64_t(sizeof(T))));
        if (v < 0 || v >= vocab) {
            *bad = v;
            return i;
        }
    }
    return -1;
}

int64_t convert_any(int code, const unsigned char* raw, int64_t n, int vocab, int* out,
                    long long* bad) {
    switch (code) {
    case 1:
        return convert<uint8_t>(raw, n, vocab, out, bad);
    case 2:
        return convert<int8_t>(raw, n, vocab, out, bad);
    case 3:
        return convert<int16_t>(raw, n, vocab, out, bad);
    case 4:
        return convert<int32_t>(raw, n, vocab, out, bad);
    case 5:
        return convert<int64_t>(raw, n, vocab, out, bad);
    case 8:
        return convert<uint16_t>(raw, n, vocab, out, bad);
    default:
        SOF_FAIL(Internal, "Megatron dtype code %d reached the token reader", code);
    }
}

[[noreturn]] void bad_token(const MegatronInfo& info, int64_t pos, long long v, int vocab) {
    const std::string bin = info.prefix + ".bin";
    const long long off = static_cast<long long>(pos) * info.token_bytes;
    if (v < 0)
        SOF_FAIL(Format,
                 "Megatron dataset %s: token %lld at position %lld (%s, byte offset %lld) is "
                 "negative: not a token id (the file is corrupt or not token ids); re-create it "
                 "with Megatron-LM's tools/preprocess_data.py",
                 bin.c_str(), v, static_cast<long long>(pos), megatron_dtype_name(info.dtype_code),
                 off);
    SOF_FAIL(Format,
             "Megatron dataset %s: token %lld at position %lld (%s, byte offset %lld) is >= "
             "model.vocab_size %d: the data was tokenized with a larger vocabulary than the "
             "model's; re-tokenize it with the model's tokenizer, or, if the model really has "
             "more tokens, set model.vocab_size to at least %lld",
             bin.c_str(), v, static_cast<long long>(pos), megatron_dtype_name(info.dtype_code), off,
             vocab, v + 1);
}

// the .bin's size must be exactly the tokens the index declares
void check_bin_size(const MegatronInfo& info, uint64_t size) {
    const uint64_t want = uint64_t(info.num_tokens) * uint64_t(info.token_bytes);
    if (size == want) return;
    SOF_FAIL(Format,
             "Megatron dataset %s.bin: %llu bytes, but its index %s.idx declares %lld tokens of "
             "%s (%llu bytes): the .bin is %s; re-create both files, or give the .bin that "
             "goes with this index",
             info.prefix.c_str(), static_cast<unsigned long long>(size), info.prefix.c_str(),
             static_cast<long long>(info.num_tokens), megatron_dtype_name(info.dtype_code),
             static_cast<unsigned long long>(want),
             size < want ? "truncated" : "longer than the index says (another dataset's .bin?)");
}

} // namespace

const char* megatron_dtype_name(int code) {
    switch (code) {
    case 1:
        return "uint8";
    case 2:
        return "int8";
    case 3:
        return "int16";
    case 4:
        return "int32";
    case 5:
        return "int64";
    case 6:
        return "float64";
    case 7:
        return "float32";
    case 8:
        return "uint16";
    default:
        return nullptr;
    }
}

MegatronInfo read_megatron_index(const std::string& prefix, std::vector<int64_t>* doc_starts) {
    const std::string path = prefix + ".idx";
    const core::InputFile f(path, "Megatron index");
    const uint64_t size = f.size();
    const char* p = path.c_str();
    if (size < kMegatronHeaderBytes)
        SOF_FAIL(Format,
                 "Megatron index %s: %llu bytes, shorter than the %d-byte header (magic, "
                 "version, dtype, sequence count, document count): truncated or not a Megatron-LM "
                 ".idx file",
                 p, static_cast<unsigned long long>(size), kMegatronHeaderBytes);
    unsigned char h[kMegatronHeaderBytes];
    f.read_at(h, sizeof h, 0);
    if (std::memcmp(h, kMegatronMagic, sizeof kMegatronMagic) != 0) {
        std::string seen;
        for (int i = 0; i < 9; i++)
            seen += (h[i] >= 0x20 && h[i] < 0x7f) ? std::string(1, char(h[i]))
                                                  : core::strfmt("\\x%02x", h[i]);
        SOF_FAIL(
            Format,
            "Megatron index %s: header magic '%s', expected 'MMIDIDX\\x00\\x00' (Megatron-LM's "
            "indexed dataset): not a Megatron .idx file",
            p, seen.c_str());
    }
    MegatronInfo info;
    info.prefix = prefix;
    const uint64_t version = load_le<uint64_t>(h + 9);
    if (version != kMegatronVersion)
        SOF_FAIL(Format,
                 "Megatron index %s: version %llu, expected %llu (the only one Megatron-LM "
                 "writes)",
                 p, static_cast<unsigned long long>(version),
                 static_cast<unsigned long long>(kMegatronVersion));
    info.dtype_code = h[17];
    const char* dt = megatron_dtype_name(info.dtype_code);
    if (!dt || info.dtype_code == 6 || info.dtype_code == 7)
        SOF_FAIL(Format,
                 "Megatron index %s: dtype code %d%s%s%s; token ids need an integer dtype: 1 "
                 "uint8, 2 int8, 3 int16, 4 int32, 5 int64, 8 uint16",
                 p, info.dtype_code, dt ? " (" : " (not a Megatron dtype code", dt ? dt : "",
                 dt ? ")" : ")");
    info.token_bytes = info.dtype_code == 1 || info.dtype_code == 2   ? 1
                       : info.dtype_code == 3 || info.dtype_code == 8 ? 2
                       : info.dtype_code == 4                         ? 4
                                                                      : 8;
    info.is_signed = info.dtype_code >= 2 && info.dtype_code <= 5;
    const uint64_t seqs = load_le<uint64_t>(h + 18), docs = load_le<uint64_t>(h + 26);
    const uint64_t body = size - kMegatronHeaderBytes;
    const bool fits = seqs <= body / 12 && docs <= body / 8 && 12 * seqs + 8 * docs <= body;
    if (!fits || 12 * seqs + 8 * docs != body) {
        const bool modes = fits && 12 * seqs + 8 * docs + seqs == body;
        if (modes)
            SOF_FAIL(Format,
                     "Megatron index %s: has a mode per sequence (a multimodal dataset); only "
                     "text datasets (tokens) can be trained on",
                     p);
        SOF_FAIL(Format,
                 "Megatron index %s: sequence count %llu and document count %llu need %s bytes "
                 "(34 + 12 x sequences + 8 x documents) but the file has %llu: truncated or "
                 "corrupt; re-create it with Megatron-LM's tools/preprocess_data.py",
                 p, static_cast<unsigned long long>(seqs), static_cast<unsigned long long>(docs),
                 fits ? std::to_string(kMegatronHeaderBytes + 12 * seqs + 8 * docs).c_str()
                      : "more",
                 static_cast<unsigned long long>(size));
    }
    if (docs == 0)
        SOF_FAIL(Format,
                 "Megatron index %s: document count 0; the document indices start with 0 (the "
                 "first document's first sequence)",
                 p);
    info.num_sequences = static_cast<int64_t>(seqs);
    info.num_documents = static_cast<int64_t>(docs);
    const uint64_t off_len = kMegatronHeaderBytes, off_ptr = off_len + 4 * seqs,
                   off_doc = off_ptr + 8 * seqs;

    // the tokens file: the sequences back to back, as IndexedDatasetBuilder writes them
    const core::InputFile bin(prefix + ".bin", "Megatron tokens");
    const int64_t max_tokens = static_cast<int64_t>(bin.size() / uint64_t(info.token_bytes));
    ChunkedArray<int32_t> lengths(f, off_len, info.num_sequences);
    ChunkedArray<int64_t> pointers(f, off_ptr, info.num_sequences);
    int64_t total = 0;
    for (int64_t i = 0; i < info.num_sequences; i++) {
        const int32_t len = lengths.at(i);
        const int64_t ptr = pointers.at(i);
        if (len < 0)
            SOF_FAIL(Format, "Megatron index %s: sequence_lengths[%lld] = %d is negative", p,
                     static_cast<long long>(i), len);
        if (ptr != total * info.token_bytes)
            SOF_FAIL(Format,
                     "Megatron index %s: sequence_pointers[%lld] = %lld, but the sequences "
                     "before it end at byte %lld: the .bin must hold the sequences back to back "
                     "in order (as Megatron-LM's IndexedDatasetBuilder writes them)",
                     p, static_cast<long long>(i), static_cast<long long>(ptr),
                     static_cast<long long>(total * info.token_bytes));
        total += len;
        if (total > max_tokens) // bounds total too: no overflow
            SOF_FAIL(Format,
                     "Megatron dataset %s.bin: %llu bytes hold %lld %s tokens, but sequences "
                     "0..%lld of its index %s already have %lld: the .bin is truncated or goes "
                     "with another index; re-create both files",
                     prefix.c_str(), static_cast<unsigned long long>(bin.size()),
                     static_cast<long long>(max_tokens), dt, static_cast<long long>(i), p,
                     static_cast<long long>(total));
    }
    info.num_tokens = total;
    check_bin_size(info, bin.size());
    if (total == 0)
        SOF_FAIL(Format, "Megatron dataset %s: its %lld sequence(s) hold no tokens", p,
                 static_cast<long long>(info.num_sequences));

    ChunkedArray<int64_t> dindex(f, off_doc, info.num_documents);
    ChunkedArray<int64_t> starts(f, off_ptr, info.num_sequences);
    if (doc_starts) doc_starts->clear();
    int64_t prev = 0;
    for (int64_t d = 0; d < info.num_documents; d++) {
        const int64_t s = dindex.at(d);
        if (d == 0 && s != 0)
            SOF_FAIL(Format,
                     "Megatron index %s: document_indices[0] = %lld; it must be 0 (the first "
                     "document starts at the first sequence)",
                     p, static_cast<long long>(s));
        if (s < prev || s > info.num_sequences)
            SOF_FAIL(Format,
                     "Megatron index %s: document_indices[%lld] = %lld %s; document indices are "
                     "sequence indices that never decrease, from 0 to the sequence count %lld",
                     p, static_cast<long long>(d), static_cast<long long>(s),
                     s < prev ? core::strfmt("is less than the one before (%lld)",
                                             static_cast<long long>(prev))
                                    .c_str()
                              : "is past the last sequence",
                     static_cast<long long>(info.num_sequences));
        prev = s;
        if (!doc_starts || s == 0 || s == info.num_sequences) continue;
        const int64_t tok = starts.at(s) / info.token_bytes;
        if (tok > 0 && tok < total && (doc_starts->empty() || tok > doc_starts->back()))
            doc_starts->push_back(tok);
    }
    return info;
}

void check_megatron_tokens(const MegatronInfo& info, int vocab) {
    const core::InputFile bin(info.prefix + ".bin", "Megatron tokens");
    check_bin_size(info, bin.size());
    std::vector<unsigned char> raw(static_cast<size_t>(std::min(kChunk, info.num_tokens)) *
                                   size_t(info.token_bytes));
    for (int64_t pos = 0; pos < info.num_tokens; pos += kChunk) {
        const int64_t n = std::min(kChunk, info.num_tokens - pos);
        bin.read_at(raw.data(), size_t(n) * size_t(info.token_bytes),
                    uint64_t(pos) * uint64_t(info.token_bytes));
        long long v = 0;
        const int64_t bad = convert_any(info.dtype_code, raw.data(), n, vocab, nullptr, &v);
        if (bad >= 0) bad_token(info, pos + bad, v, vocab);
    }
}

MegatronTokens::MegatronTokens(const MegatronInfo& info)
    : info_(info),
      bin_(std::make_unique<core::InputFile>(info.prefix + ".bin", "Megatron tokens")) {
    check_bin_size(info_, bin_->size());
}

MegatronTokens::~MegatronTokens() = default;

void MegatronTokens::read(int64_t first, int64_t n, int vocab, int* out) const {
    if (first < 0 || n < 0 || first + n > info_.num_tokens)
        SOF_FAIL(Internal, "Megatron dataset %s: tokens [%lld, %lld) are outside its %lld",
                 info_.prefix.c_str(), static_cast<long long>(first),
                 static_cast<long long>(first + n), static_cast<long long>(info_.num_tokens));
    raw_.resize(size_t(n) * size_t(info_.token_bytes));
    bin_->read_at(raw_.data(), raw_.size(), uint64_t(first) * uint64_t(info_.token_bytes));
    long long v = 0;
    const int64_t bad = convert_any(info_.dtype_code, raw_.data(), n, vocab, out, &v);
    if (bad >= 0) bad_token(info_, first + bad, v, vocab);
}

} // namespace sof::data
