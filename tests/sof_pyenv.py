# The Python reference tests' one way to get their packages: import them, or re-run the script
# in the project's venv (scripts/python_env.sh), or skip (77; under SOF_REQUIRE_PYENV=1, fail).
# scripts/run_tests.sh (CI) sets SOF_REQUIRE_PYENV=1: there a missing environment fails the test.
import importlib
import os
import sys

WHY = {
    "test": "run scripts/python_env.sh test to install torch and transformers",
    "tools": "run scripts/python_env.sh tools to install the pinned packages",
    None: "install python3-torch and python3-numpy (Debian 12), or run scripts/python_env.sh test "
          "(Ubuntu 24.04 has no python3-torch), to run this test",
}


def require(*modules, venv=None):
    """The imported modules, in order. venv: 'test' or 'tools' (the venv to re-run the script in
    when an import fails; $SOF_PYENV overrides its path) or None (the system python's packages,
    else the test venv's, which has torch and numpy too: Ubuntu 24.04 packages no torch)."""
    try:
        return [importlib.import_module(m) for m in modules]
    except ImportError as e:
        path = os.environ.get("SOF_PYENV",
                              os.path.expanduser(f"~/.cache/superoffload/pyenv-{venv or 'test'}"))
        py = os.path.join(path, "bin", "python")
        if os.path.realpath(sys.prefix) != os.path.realpath(path) and os.path.exists(py):
            os.execv(py, [py] + sys.argv)
        required = os.environ.get("SOF_REQUIRE_PYENV") == "1"
        print(f"{'FAIL' if required else 'SKIP'}: {e}; {WHY[venv]}"
              + (" (SOF_REQUIRE_PYENV=1: the Python environment is required)" if required else ""))
        sys.exit(1 if required else 77)
