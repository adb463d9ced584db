// doctest's implementation, compiled once for every test program (sof_doctest): a test source
// only includes <doctest/doctest.h>, which keeps each test's compile to its own code.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
