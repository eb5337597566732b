# Ferry's everyday commands. The scripts they call work without `just` too.

# List the recipes.
default:
    @just --list

# Install the guest toolchains if missing (rustup's wasm32-wasip2 or Debian's fallback; componentize-py).
setup:
    scripts/setup-guest-toolchain
    scripts/setup-python-guest

# Install the pinned tools `ferry build` runs for JavaScript connectors (componentize-js).
setup-js:
    scripts/setup-js-guest

# Build everything and run the quickstart: a random source delivering to the local log.
demo:
    scripts/demo

# Set up and run every test (what CI runs).
test *ARGS:
    scripts/test {{ARGS}}

# Build the guest crates into components under target/components/.
guests *PACKAGES:
    cargo run --release --locked -q -p ferry-componentize -- {{PACKAGES}}

# Throughput, memory and isolation figures (both benchmarks).
bench *ARGS:
    cargo bench --locked -p ferry-tests {{ARGS}}

# Formatting and lints.
lint:
    cargo fmt --all --check
    cargo clippy --release --workspace --all-targets --locked -- -D warnings
