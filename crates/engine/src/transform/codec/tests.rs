use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ferry_config::schema::Schema;
use prost::Message as _;
use serde_json::{Value, json};

use super::Codec;

const ORDER: &str = r#"{"type": "record", "name": "Order", "fields": [
    {"name": "seq", "type": "long"},
    {"name": "qty", "type": "int"},
    {"name": "note", "type": ["null", "string"], "default": null},
    {"name": "tags", "type": {"type": "array", "items": "string"}}
]}"#;

fn codec(schema: Schema) -> Codec {
    Codec::new(schema, Some(ORDER)).unwrap().expect("a codec")
}

fn decoded(codec: &Codec, payload: &[u8]) -> Value {
    serde_json::from_slice(&codec.decode(payload).unwrap().expect("decoded")).unwrap()
}

#[test]
fn avro_records_go_to_datums_and_back_and_what_does_not_fit_is_said() {
    let avro = codec(Schema::Avro);
    let order = json!({"seq": 7, "qty": 3, "note": "rush", "tags": ["a", "b"]});
    let datum = avro.encode(order.to_string().as_bytes()).unwrap().expect("encoded");
    assert_ne!(datum, order.to_string().into_bytes());
    // The datum is what an independent Avro reader reads under the same schema.
    let schema = apache_avro::Schema::parse_str(ORDER).unwrap();
    let reader = apache_avro::reader::datum::GenericDatumReader::builder(&schema).build().unwrap();
    let value = reader.read_value(&mut datum.as_slice()).unwrap();
    assert_eq!(Value::try_from(value).unwrap(), order);
    assert_eq!(decoded(&avro, &datum), order);
    let no_note = json!({"seq": 8, "qty": 1, "note": null, "tags": []});
    assert_eq!(decoded(&avro, &avro.encode(no_note.to_string().as_bytes()).unwrap().unwrap()), no_note);

    let wrong = avro.encode(br#"{"seq": "seven", "qty": 3, "tags": []}"#).unwrap_err();
    assert!(wrong.contains("does not fit the Avro schema"), "{wrong}");
    assert!(avro.encode(b"not json").unwrap_err().contains("not JSON"));
    let mut trailing = datum.clone();
    trailing.push(0);
    assert!(avro.decode(&trailing).unwrap_err().contains("1 byte(s) after the Avro datum"));
    assert!(avro.decode(&[0xff]).unwrap_err().contains("not an Avro datum"));
    assert!(avro.decode(b"").unwrap_err().contains("empty"));
    let bad_schema = Codec::new(Schema::Avro, Some("{\"type\": \"recrod\"}")).unwrap_err();
    assert!(bad_schema.contains("not an Avro schema"), "{bad_schema}");
}

#[test]
fn proto_carries_json_in_a_string_value_and_other_bytes_in_a_bytes_value() {
    let proto = codec(Schema::Proto);
    let encoded = proto.encode(br#"{ "seq": 1 }"#).unwrap().unwrap();
    let any = prost_types::Any::decode(encoded.as_slice()).unwrap();
    assert_eq!(any.type_url, "type.googleapis.com/google.protobuf.StringValue");
    assert_eq!(any.value, br#"{"seq":1}"#, "compact JSON");
    assert_eq!(decoded(&proto, &encoded), json!({"type_url": any.type_url, "value": STANDARD.encode(br#"{"seq":1}"#)}));
    let raw = proto.encode(&[0, 159, 146, 150]).unwrap().unwrap();
    let any = prost_types::Any::decode(raw.as_slice()).unwrap();
    assert_eq!(
        (any.type_url.as_str(), any.value.as_slice()),
        ("type.googleapis.com/google.protobuf.BytesValue", &[0, 159, 146, 150][..])
    );
    let garbage = proto.decode(&[0xff, 0xff, 0xff]).unwrap_err();
    assert!(garbage.contains("not a protobuf Any"), "{garbage}");
    assert!(proto.decode(b"").unwrap_err().contains("empty"));
}

#[test]
fn flat_buffers_hold_an_objects_keys_and_values_and_are_shown_whole() {
    let flat = codec(Schema::FlatBuffer);
    let encoded = flat.encode(br#"{"name": "ada", "age": 36}"#).unwrap().unwrap();
    // The root is a vector of 4 entries: key, value, key, value.
    let root = u32::from_le_bytes(encoded[0..4].try_into().unwrap()) as usize;
    let length = u32::from_le_bytes(encoded[root..root + 4].try_into().unwrap());
    assert_eq!(length, 4);
    let shown = decoded(&flat, &encoded);
    assert_eq!(shown["buffer_size"], encoded.len());
    assert_eq!(shown["has_root_table"], true);
    assert_eq!(STANDARD.decode(shown["raw_data_base64"].as_str().unwrap()).unwrap(), encoded);
    let small = flat.decode(&[1, 2, 3]).unwrap_err();
    assert!(small.contains("too small for a FlatBuffer"), "{small}");
    // Not JSON: the bytes themselves, as a vector.
    let bytes = flat.encode(&[0xfe, 1]).unwrap().unwrap();
    let root = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    assert_eq!(&bytes[root..root + 6], &[2, 0, 0, 0, 0xfe, 1]);
}

#[test]
fn json_and_text_are_carried_as_they_are_once_checked_and_raw_has_no_codec() {
    let json = codec(Schema::Json);
    assert_eq!(json.decode(br#"{"a": 1}"#), Ok(None));
    assert_eq!(json.encode(b"[1, 2]"), Ok(None));
    assert!(json.decode(b"{oops").unwrap_err().contains("not JSON"));
    let text = codec(Schema::Text);
    assert_eq!(text.decode("héllo".as_bytes()), Ok(None));
    assert!(text.encode(&[0xff]).unwrap_err().contains("not UTF-8"));
    assert!(Codec::new(Schema::Raw, None).unwrap().is_none());
    assert!(Codec::new(Schema::Avro, None).is_err());
}
