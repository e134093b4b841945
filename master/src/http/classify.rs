//! The body of `POST /v1/classify` to the task it names and a [`ValidRequest`]: a JSON
//! object, or the same fields as multipart form parts with `image` as a file part. Apart
//! from the handler so that the fuzz target (`fuzz/fuzz_targets/master_classify.rs`)
//! runs this very code on arbitrary bodies.

use actix_multipart::Multipart;
use actix_web::error::PayloadError;
use actix_web::http::header::{self, HeaderMap};
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt as _};
use serde_json::{Map, Value};

use super::views::CLASSIFY_FIELDS;
use crate::serving::request::{self, SingleItem, ValidRequest};
use crate::{Master, MasterError};
use cocktail_common::oip::InferRequest;
use cocktail_common::oip::limits::MAX_BODY_BYTES;

/// Reads and checks a `/v1/classify` body; returns the task's name and the request.
pub async fn classify_request<S>(
    master: &Master,
    headers: &HeaderMap,
    payload: S,
) -> Result<(String, ValidRequest), MasterError>
where
    S: Stream<Item = Result<Bytes, PayloadError>> + Unpin + 'static,
{
    let multipart = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("multipart/form-data"));
    let (fields, image) = if multipart {
        read_multipart(Multipart::new(headers, payload)).await?
    } else {
        let body = read_limited(payload).await?;
        let fields: Map<String, Value> = serde_json::from_slice(&body)
            .map_err(|e| MasterError::Malformed(format!("expected a JSON object: {e}")))?;
        (fields, None)
    };
    if let Some(unknown) = fields
        .keys()
        .find(|name| !CLASSIFY_FIELDS.contains(&name.as_str()))
    {
        return Err(MasterError::invalid(
            unknown.clone(),
            format!("is not a field of /v1/classify; it takes {CLASSIFY_FIELDS:?}"),
        ));
    }
    let task_name = match fields.get("task") {
        Some(Value::String(t)) => t.clone(),
        _ => {
            return Err(MasterError::invalid(
                "task",
                "is required: the task to classify for",
            ));
        }
    };
    let table = master.task(&task_name)?;
    let decoded;
    let item = match (&image, fields.get("image"), fields.get("text")) {
        (Some(bytes), _, _) => SingleItem::Image(bytes),
        (None, Some(Value::String(b64)), _) => {
            use base64::Engine as _;
            decoded = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| MasterError::invalid("image", format!("not valid base64: {e}")))?;
            SingleItem::Image(&decoded)
        }
        (None, None, Some(Value::String(text))) => SingleItem::Text(text),
        _ => {
            return Err(MasterError::invalid(
                "image",
                "one of `image` (base64 or file part) or `text` (string) is required",
            ));
        }
    };
    let input = request::single_item_input(table.kind, item)?;
    let form = InferRequest {
        id: fields.get("id").and_then(Value::as_str).map(str::to_owned),
        inputs: Vec::new(),
        parameters: Some(fields),
        outputs: None,
    };
    let request = request::valid(&table, vec![input], form, master.config.member_wire)?;
    Ok((task_name, request))
}

/// The whole body, refused past [`MAX_BODY_BYTES`].
pub async fn read_limited<S>(mut payload: S) -> Result<Bytes, MasterError>
where
    S: Stream<Item = Result<Bytes, PayloadError>> + Unpin,
{
    let mut body = BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| MasterError::invalid("body", format!("cannot read: {e}")))?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(MasterError::PayloadTooLarge {
                limit: MAX_BODY_BYTES,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// Reads form fields as strings and the `image` part as bytes, within the body limit.
async fn read_multipart(
    mut form: Multipart,
) -> Result<(Map<String, Value>, Option<Vec<u8>>), MasterError> {
    let mut fields = Map::new();
    let mut image = None;
    let mut total = 0_usize;
    while let Some(part) = form.next().await {
        let mut part = part.map_err(|e| MasterError::Malformed(format!("multipart: {e}")))?;
        let name = part.name().unwrap_or_default().to_owned();
        let mut data = Vec::new();
        while let Some(chunk) = part.next().await {
            let chunk = chunk.map_err(|e| MasterError::Malformed(format!("multipart: {e}")))?;
            total += chunk.len();
            if total > MAX_BODY_BYTES {
                return Err(MasterError::PayloadTooLarge {
                    limit: MAX_BODY_BYTES,
                });
            }
            data.extend_from_slice(&chunk);
        }
        if name == "image" {
            image = Some(data);
        } else {
            let text = String::from_utf8(data)
                .map_err(|_| MasterError::invalid(name.clone(), "must be UTF-8 text"))?;
            fields.insert(name, Value::String(text));
        }
    }
    Ok((fields, image))
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::HeaderValue;

    use super::*;
    use crate::MasterConfig;

    fn body(bytes: &[u8]) -> impl Stream<Item = Result<Bytes, PayloadError>> + Unpin + 'static {
        // Small chunks, as a slow client sends them: multipart parsing is incremental.
        let chunks: Vec<_> = bytes
            .chunks(7)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        futures_util::stream::iter(chunks)
    }

    fn headers(content_type: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers
    }

    fn form(parts: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, value) in parts {
            out.extend_from_slice(
                format!("--XyZ\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n")
                    .as_bytes(),
            );
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"--XyZ--\r\n");
        out
    }

    #[tokio::test]
    async fn json_and_multipart_bodies() {
        let master = Master::new(MasterConfig::default()).unwrap();
        let json = br#"{"task": "sentiment", "text": "great", "latency_ms": 5, "accuracy": 0.5, "label": "positive"}"#;
        let (task, request) = classify_request(&master, &headers("application/json"), body(json))
            .await
            .unwrap();
        assert_eq!((task.as_str(), request.items), ("sentiment", 1));
        assert_eq!(request.labels, Some(vec![1]));

        let multipart = form(&[
            ("task", b"fashion"),
            ("latency_ms", b" 0.5 "),
            ("accuracy", b"0.9"),
            ("image", b"\x89PNG not really"),
        ]);
        let (task, request) = classify_request(
            &master,
            &headers("multipart/form-data; boundary=XyZ"),
            body(&multipart),
        )
        .await
        .unwrap();
        assert_eq!(task, "fashion");
        assert_eq!(request.constraint.latency_ms, 0.5);
        let header = request.member.header.unwrap();
        assert!(
            std::str::from_utf8(&request.member.body[..header])
                .unwrap()
                .contains("\"image\"")
        );
        assert!(request.member.body.ends_with(b"\x89PNG not really"));
    }

    #[tokio::test]
    async fn a_part_cut_short_is_refused_not_awaited_forever() {
        // Found by fuzzing (master_classify): actix-multipart 0.7 waited forever for a
        // part whose body ends right after a `\r`; 0.8.2 and later say it is incomplete.
        let master = Master::new(MasterConfig::default()).unwrap();
        let mut bytes = form(&[("task", b"sentiment")]);
        bytes.truncate(bytes.len() - b"--XyZ--\r\n".len());
        bytes.extend_from_slice(
            b"--XyZ\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\n\xff\xfe\rJ--XyZ--\r\n",
        );
        let multipart = headers("multipart/form-data; boundary=XyZ");
        let parsed = classify_request(&master, &multipart, body(&bytes));
        let err = tokio::time::timeout(std::time::Duration::from_secs(5), parsed)
            .await
            .expect("an incomplete body is answered")
            .unwrap_err();
        assert!(matches!(err, MasterError::Malformed(_)), "{err}");
    }

    #[tokio::test]
    async fn bad_bodies_name_the_field() {
        let master = Master::new(MasterConfig::default()).unwrap();
        let multipart = headers("multipart/form-data; boundary=XyZ");
        let cases: [(&HeaderMap, Vec<u8>, &str); 4] = [
            (
                &multipart,
                form(&[("task", b"\xff")]),
                "`task`: must be UTF-8",
            ),
            (&multipart, form(&[("text", b"hi")]), "`task`: is required"),
            (&multipart, b"--XyZ\r\ngarbage".to_vec(), "multipart"),
            (
                &headers("application/json"),
                br#"{"task": "fashion", "image": "***", "latency_ms": 5, "accuracy": 0.5}"#
                    .to_vec(),
                "`image`: not valid base64",
            ),
        ];
        for (headers, bytes, expected) in cases {
            let err = classify_request(&master, headers, body(&bytes))
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{err}");
        }
    }
}
