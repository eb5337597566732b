//! What the list of capabilities in `lib.rs` generates: one struct field or one call
//! per capability, in the list's order, so that nothing else in the host names every
//! capability by hand.

/// See the module documentation; the list itself is in `lib.rs`.
macro_rules! capabilities {
    (
        always { $( $always:ident : $always_cap:ident ),* $(,)? }
        granted { $( $granted:ident : $granted_cap:ident ),* $(,)? }
    ) => {
        // Each capability is the folder of its name.
        $( pub mod $always; )*
        $( pub mod $granted; )*
        $crate::registry::capabilities!(@generate
            always { $( $always : $always::$always_cap ),* }
            granted { $( $granted : $granted::$granted_cap ),* }
        );
    };
    (@generate
        always { $( $always:ident : $always_ty:ty ),* }
        granted { $( $granted:ident : $granted_ty:ty ),* }
    ) => {
        /// `[*.grants]`: what one connector may reach besides what every guest has.
        /// Nothing by default; an unknown key is an error naming it.
        #[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct Grants {
            $( pub $granted: <$granted_ty as $crate::Capability>::Grant, )*
        }

        /// The host-wide sections of the capabilities that have one (`[postgres.NAME]`),
        /// read from the top of the config file.
        #[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
        #[serde(default)]
        pub struct Sections {
            $( pub $granted: <$granted_ty as $crate::Capability>::Section, )*
        }

        /// What every instance of one connector shares (made by [`Grants::prepare`]).
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Shared {
            $( pub $always: <$always_ty as $crate::Capability>::Shared, )*
            $( pub $granted: <$granted_ty as $crate::Capability>::Shared, )*
        }

        /// What one instance keeps of each capability (made by [`instantiate`]).
        pub struct States {
            $( pub $always: <$always_ty as $crate::Capability>::State, )*
            $( pub $granted: <$granted_ty as $crate::Capability>::State, )*
        }

        /// The keys of `[*.grants]`, which are also the only keys a capability's
        /// section may have at the top of the config.
        pub const GRANTED: &[&str] = &[ $( stringify!($granted) ),* ];

        impl Sections {
            /// Check every section alone; the error names the section.
            pub fn validate(&self) -> Result<(), String> {
                $( <$granted_ty as $crate::Capability>::validate_section(&self.$granted)?; )*
                Ok(())
            }

            /// Every path in the sections, to resolve against the config's directory.
            pub fn paths_mut(&mut self) -> Vec<&mut std::path::PathBuf> {
                let mut paths = Vec::new();
                $( paths.extend(<$granted_ty as $crate::Capability>::section_paths(&mut self.$granted)); )*
                paths
            }

            /// The files the sections name (passwords, certificates), which no guest
            /// may reach. (Copies: the capabilities hand their paths out only to be
            /// resolved, mutably.)
            pub fn files(&self) -> Vec<std::path::PathBuf> {
                self.clone().paths_mut().into_iter().map(|path| path.clone()).collect()
            }
        }

        impl Grants {
            /// Check every grant against the sections: the key and the problem.
            pub fn validate(&self, sections: &Sections) -> Result<(), (&'static str, String)> {
                $( <$granted_ty as $crate::Capability>::validate(&self.$granted, &sections.$granted)?; )*
                Ok(())
            }

            /// Every path in the grants, to resolve against the config's directory.
            pub fn paths_mut(&mut self) -> Vec<&mut std::path::PathBuf> {
                let mut paths = Vec::new();
                $( paths.extend(<$granted_ty as $crate::Capability>::grant_paths(&mut self.$granted)); )*
                paths
            }

            /// What every instance of a connector with these grants shares.
            pub fn prepare(&self, sections: &Sections) -> Result<Shared, String> {
                Ok(Shared {
                    $( $always: <$always_ty as $crate::Capability>::prepare(&Default::default(), &Default::default())?, )*
                    $( $granted: <$granted_ty as $crate::Capability>::prepare(&self.$granted, &sections.$granted)?, )*
                })
            }

            /// What `import` (an interface name like `wasi:filesystem/types@0.2.3`)
            /// gets under these grants.
            pub fn verdict(&self, import: &str) -> $crate::Verdict {
                let import = $crate::Import::parse(import);
                if import.is("iggy:connector", "types") {
                    return $crate::Verdict::Granted("the contract's types");
                }
                // Served by the runtime to every sink, from the batch it writes.
                if import.is("iggy:connector", "stored-checksums") {
                    return $crate::Verdict::Granted("the contract's stored checksums");
                }
                $(
                    if let Some(verdict) = <$always_ty as $crate::Capability>::verdict(&import, &Default::default()) {
                        return verdict;
                    }
                )*
                $(
                    if let Some(verdict) = <$granted_ty as $crate::Capability>::verdict(&import, &self.$granted) {
                        return verdict;
                    }
                )*
                $crate::Verdict::Unavailable
            }

            /// The secret values these grants reach.
            pub fn secrets(&self, sections: &Sections) -> Vec<String> {
                let mut secrets = Vec::new();
                $( secrets.extend(<$granted_ty as $crate::Capability>::secrets(&self.$granted, &sections.$granted)); )*
                secrets
            }

            /// The host files and directories these grants open to the guest.
            pub fn host_files(&self) -> Vec<$crate::HostFile<'_>> {
                let mut files = Vec::new();
                $( files.extend(<$granted_ty as $crate::Capability>::host_files(&self.$granted)); )*
                files
            }

            /// What these grants reach on the host, to fingerprint.
            pub fn reach(&self, sections: &Sections) -> String {
                let mut reach = String::new();
                $(
                    reach.push_str(stringify!($granted));
                    reach.push_str(": ");
                    reach.push_str(&<$granted_ty as $crate::Capability>::reach(&self.$granted, &sections.$granted));
                    reach.push('\n');
                )*
                reach
            }
        }

        /// What one instance of a connector with `grants` (and `shared`) keeps of each
        /// capability, its WASI interfaces granted in `instance.wasi` on the way.
        pub async fn instantiate(
            grants: &Grants,
            shared: &Shared,
            instance: &mut $crate::InstanceBuilder<'_>,
        ) -> Result<States, String> {
            Ok(States {
                $( $always: <$always_ty as $crate::Capability>::instantiate(&Default::default(), &shared.$always, instance).await?, )*
                $( $granted: <$granted_ty as $crate::Capability>::instantiate(&grants.$granted, &shared.$granted, instance).await?, )*
            })
        }

        /// Add every capability's imports to `linker`.
        pub fn link_all<T: $crate::GuestData>(linker: &mut wasmtime::component::Linker<T>) -> wasmtime::Result<()> {
            $( <$always_ty as $crate::Capability>::link(linker)?; )*
            $( <$granted_ty as $crate::Capability>::link(linker)?; )*
            Ok(())
        }
    };
}

pub(crate) use capabilities;
