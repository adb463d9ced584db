// The default main() of a test program: run every case with doctest's command line. A program
// with its own main() (tests/train/mpi_main.h, the op driver's harness) never pulls this object
// from the sof_doctest archive, since a linker takes an archive member only for a symbol still
// undefined.
#include <doctest/doctest.h>

int main(int argc, char** argv) {
    return doctest::Context(argc, argv).run();
}
