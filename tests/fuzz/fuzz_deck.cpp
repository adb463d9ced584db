// Fuzz harness: the deck parser. Any text either loads (then the model checks, the warnings and
// the effective-deck round trip must hold) or is refused with a core::Error.
#include <string>

#include "config/deck.h"
#include "core/error.h"
#include "fuzz.h"
#include "model/model_config.h"

using namespace sof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    SOF_FUZZ_EXPECT_ONLY_CORE_ERRORS({
        config::Config c =
            config::load_deck_from_string(text, "fuzz.yaml", {}, config::DeckChecks::NoFiles);
        config::deck_warnings(c);
        // the echo of a loaded deck loads back to the same deck
        const std::string y = config::effective_yaml(c);
        const config::Config back =
            config::load_deck_from_string(y, "echo.yaml", {}, config::DeckChecks::NoFiles);
        if (config::effective_yaml(back) != y)
            fuzz::finding("the effective deck does not read back as itself:\n" + y);
        model::validate_deck(c);
    });
    // the lenient reader of checkpoint decks: skips unknown keys, validates nothing
    SOF_FUZZ_EXPECT_ONLY_CORE_ERRORS(config::parse_deck_text(text, "checkpoint deck.yaml"));
    return 0;
}
