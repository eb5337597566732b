//! A perfectly good component that is not a Ferry source: it exports a greeter.
//! Ferry must refuse it and say what it exports instead.

wit_bindgen::generate!({
    inline: r#"
        package example:hello@0.1.0;

        interface greeter {
            greet: func(name: string) -> string;
        }

        world hello {
            export greeter;
        }
    "#,
});

struct Hello;

impl exports::example::hello::greeter::Guest for Hello {
    fn greet(name: String) -> String {
        format!("hello, {name}")
    }
}

export!(Hello);
