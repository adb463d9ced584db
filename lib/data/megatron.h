// Megatron-LM indexed datasets (<prefix>.idx + <prefix>.bin, as tools/preprocess_data.py writes
// them through megatron/core/datasets/indexed_dataset.py), read directly: index validation, the
// token stream, document boundaries. Format and errors: docs/data.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sof::core {
class InputFile;
}

namespace sof::data {

// The index header: 9 magic bytes, then little-endian uint64 version, uint8 dtype code, uint64
// sequence count, uint64 document count (34 bytes); then int32 sequence_lengths[S], int64
// sequence_pointers[S] (byte offsets into .bin), int64 document_indices[D].
constexpr char kMegatronMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kMegatronVersion = 1;
constexpr int kMegatronHeaderBytes = 34;

// What a dataset's index says, after validation.
struct MegatronInfo {
    std::string prefix;     // <prefix>.idx, <prefix>.bin
    int dtype_code = 0;     // 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 8 uint16
    int token_bytes = 0;    // 1, 2, 4 or 8
    bool is_signed = false; // int8/int16/int32/int64
    int64_t num_sequences = 0;
    int64_t num_documents = 0; // entries of document_indices (documents + 1 in Megatron's own)
    int64_t num_tokens = 0;    // all sequences together: the .bin holds exactly these
};

// The name of a dtype code ("uint16"), or nullptr for a code Megatron does not define.
const char* megatron_dtype_name(int code);

// Reads and validates <prefix>.idx and the size of <prefix>.bin: magic, version, dtype (an integer
// type), counts against the file size, every sequence length >= 0, every pointer where the
// lengths put it (the .bin is the sequences back to back), document indices from 0, never
// decreasing, at most the sequence count, the .bin's size. Constant memory (streams the arrays).
// With doc_starts, also the token offsets where the documents begin (sorted, distinct, > 0 and <
// num_tokens: the document boundaries inside the stream). Errors (Format; Io when a file cannot be
// read) name the file, the field and the fix.
MegatronInfo read_megatron_index(const std::string& prefix, std::vector<int64_t>* doc_starts);

// Checks every token of <prefix>.bin against [0, vocab) (streaming, 1M tokens at a time): a
// negative or too large id is a Format error naming the file, the position, the value, the fix.
void check_megatron_tokens(const MegatronInfo& info, int vocab);

// An open <prefix>.bin for reading token ranges.
class MegatronTokens {
  public:
    explicit MegatronTokens(const MegatronInfo& info); // checks the file size again
    ~MegatronTokens();
    MegatronTokens(const MegatronTokens&) = delete;
    MegatronTokens& operator=(const MegatronTokens&) = delete;
    // out[i] = token first + i, i < n, each checked against [0, vocab) like check_megatron_tokens
    void read(int64_t first, int64_t n, int vocab, int* out) const;

  private:
    MegatronInfo info_;
    std::unique_ptr<core::InputFile> bin_;
    mutable std::vector<uint8_t> raw_; // scratch: n * token_bytes
};

} // namespace sof::data
