// How the program ends on an error: fatal_all (every rank detected it; rank 0 prints, all ranks
// finalize and exit together) vs fatal_one (one rank detected it; it prints with its rank,
// MPI_Abort).
#pragma once

#include <string>

#include "core/error.h"

namespace sof::app {

// Exit code for an error kind: usage/config 2, I/O 3, format 4, runtime 1, internal 70.
int exit_code_for(core::ErrorKind kind);

// The message with control bytes (C0 and C1) and bytes that are not UTF-8 (from a garbage deck or
// file name) written as \xNN, so an error cannot move the terminal's cursor or ring its bell;
// newlines, tabs and well-formed UTF-8 text stay.
std::string printable(const std::string& msg);

// Every rank calls this with the same error (deck and usage errors are found by all ranks).
[[noreturn]] void fatal_all(int rank, core::ErrorKind kind, const std::string& msg);
// Only this rank knows: print "[rank r] superoffload: <kind>: msg" and abort the whole job.
[[noreturn]] void fatal_one(int rank, int world_size, core::ErrorKind kind, const std::string& msg);

} // namespace sof::app
