//! Builds every guest crate of the workspace into a component before the tests
//! compile, and tells the tests where each one is (`ferry_tests::components`). The
//! tests therefore always run the guests' current source, never a stale `.wasm`.

use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is inside the workspace");
    for input in ["wit", "guest-sdk", "connectors", "tests/guests", "Cargo.lock", "componentize"] {
        println!("cargo:rerun-if-changed={}", root.join(input).display());
    }
    println!("cargo:rerun-if-env-changed=FERRY_GUEST_TOOLCHAIN");

    let built = ferry_componentize::workspace_guests(root)
        .and_then(|guests| {
            let toolchain = ferry_componentize::Toolchain::detect()?;
            ferry_componentize::build(root, &guests, &toolchain)
        })
        .unwrap_or_else(|error| panic!("cannot build the guest components: {error:#}"));

    let mut consts = String::new();
    for component in built {
        let name = component.package.to_uppercase().replace('-', "_");
        consts.push_str(&format!(
            "/// The `{}` component.\npub const {name}: &str = {:?};\n",
            component.package,
            component.path.display().to_string()
        ));
    }
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("components.rs");
    std::fs::write(out, consts).expect("writing components.rs");
}
