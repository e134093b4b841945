//! What the worker's HTTP surface shares with the master's: endpoints that answer any
//! method they do not declare with 405 and an `Allow` header, a JSON 404 for unknown
//! paths, and an OpenAPI document narrowed to the names this process serves. Every one of
//! these answers has the error body of every other error, `{"error", "error_type"}`.

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::{FromRequest, Handler, HttpRequest, HttpResponse, Resource, Responder, web};
use cocktail_common::oip::ErrorBody;
use serde_json::{Value, json};

/// `path` answered by `handler` for `method`; any other method gets 405, naming `method`
/// in `Allow`.
pub fn endpoint<F, Args>(path: &str, method: Method, handler: F) -> Resource
where
    F: Handler<Args>,
    Args: FromRequest + 'static,
    F::Output: Responder + 'static,
{
    let allow = method.to_string();
    web::resource(path)
        .route(web::method(method).to(handler))
        .default_service(web::to(move |request: HttpRequest| {
            let allow = allow.clone();
            async move { method_not_allowed(&request, &allow) }
        }))
}

fn method_not_allowed(request: &HttpRequest, allow: &str) -> HttpResponse {
    let mut response = error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} is not allowed on {}; it takes {allow}",
            request.method(),
            request.path()
        ),
    );
    if let Ok(value) = HeaderValue::from_str(allow) {
        response.headers_mut().insert(header::ALLOW, value);
    }
    response
}

/// The answer for a path no route declares.
pub async fn not_found(request: HttpRequest) -> HttpResponse {
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route {}; see /openapi.json", request.path()),
    )
}

fn error(status: StatusCode, error_type: &str, error: String) -> HttpResponse {
    HttpResponse::build(status).json(ErrorBody {
        error,
        error_type: error_type.to_owned(),
    })
}

/// Narrows the path parameter `name` of every operation in the OpenAPI document `doc` to
/// `values`: this process serves those and answers 404 to any other.
pub fn narrow_path_parameter(doc: &mut Value, name: &str, values: &[String]) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    let operations = paths
        .values_mut()
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut());
    for operation in operations {
        let Some(parameters) = operation
            .get_mut("parameters")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for parameter in parameters {
            if parameter["name"] == name && parameter["in"] == "path" {
                parameter["schema"] = json!({ "type": "string", "enum": values });
            }
        }
    }
}

/// Narrows the string property `property` of the component schema `schema` to `values`.
pub fn narrow_property(doc: &mut Value, schema: &str, property: &str, values: &[String]) {
    if let Some(property) = doc
        .pointer_mut(&format!(
            "/components/schemas/{schema}/properties/{property}"
        ))
        .and_then(Value::as_object_mut)
    {
        property.insert("enum".into(), json!(values));
    }
}

/// Declares the bearer scheme `scheme` in the OpenAPI document `doc` and requires it, with
/// its 401 answer, on every operation but those of the paths in `open`.
pub fn require_bearer(doc: &mut Value, scheme: &str, description: &str, open: &[&str]) {
    if let Some(components) = doc.get_mut("components").and_then(Value::as_object_mut) {
        let schemes = components
            .entry("securitySchemes")
            .or_insert_with(|| json!({}));
        schemes[scheme] = json!({ "type": "http", "scheme": "bearer", "description": description });
    }
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        if open.contains(&path.as_str()) {
            continue;
        }
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for operation in item.values_mut().filter_map(Value::as_object_mut) {
            operation.insert("security".into(), json!([{ scheme: [] }]));
            if let Some(responses) = operation
                .get_mut("responses")
                .and_then(Value::as_object_mut)
            {
                responses.insert(
                    "401".into(),
                    json!({
                        "description": format!("No or a wrong {}", scheme.replace('_', " ")),
                        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ErrorBody" } } },
                    }),
                );
            }
        }
    }
}

/// A 200 with an OIP body: JSON, or JSON then binary tensors with the
/// `Inference-Header-Content-Length` header when `header` gives the JSON's length.
pub fn oip_body(header: Option<usize>) -> actix_web::HttpResponseBuilder {
    let mut response = HttpResponse::Ok();
    match header {
        Some(length) => response
            .content_type("application/octet-stream")
            .insert_header((cocktail_common::oip::binary::HEADER_LENGTH, length)),
        None => response.content_type("application/json"),
    };
    response
}

/// Triton's binary tensor extension: the JSON request or answer (as long as the
/// `Inference-Header-Content-Length` header says), then each binary tensor's raw
/// little-endian elements in order (BYTES elements: a 4-byte length, then the bytes).
#[derive(Debug, utoipa::ToSchema)]
#[schema(format = Binary)]
#[expect(
    dead_code,
    reason = "a schema only: the handlers read and write the body as bytes"
)]
pub struct BinaryTensors(String);

#[cfg(test)]
mod tests {
    use actix_web::test::{TestRequest, call_service, init_service, read_body_json};
    use actix_web::{App, http::Method};

    use super::*;

    #[actix_web::test]
    async fn undeclared_methods_get_405_with_allow_and_unknown_paths_a_json_404() {
        let app = init_service(
            App::new()
                .service(endpoint("/v2/health/live", Method::GET, HttpResponse::Ok))
                .default_service(web::to(not_found)),
        )
        .await;
        let get = TestRequest::get().uri("/v2/health/live").to_request();
        assert_eq!(call_service(&app, get).await.status(), StatusCode::OK);

        let delete = TestRequest::delete().uri("/v2/health/live").to_request();
        let response = call_service(&app, delete).await;
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(response.headers().get(header::ALLOW).unwrap(), "GET");
        let body: ErrorBody = read_body_json(response).await;
        assert_eq!(body.error_type, "method_not_allowed");
        assert!(body.error.contains("DELETE"), "{}", body.error);

        let unknown = TestRequest::get().uri("/v3/nothing").to_request();
        let response = call_service(&app, unknown).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let body: ErrorBody = read_body_json(response).await;
        assert_eq!(body.error_type, "not_found");
        assert!(body.error.contains("/v3/nothing"), "{}", body.error);
    }

    #[test]
    fn narrowing_touches_only_the_named_parameter_and_property() {
        let mut doc = json!({
            "paths": {
                "/v2/models/{model}": { "get": { "parameters": [
                    { "name": "model", "in": "path", "schema": { "type": "string" } },
                    { "name": "model", "in": "query", "schema": { "type": "string" } },
                ] } },
                "/v2": { "get": { "responses": {} } },
            },
            "components": { "schemas": { "Registration": { "properties": {
                "model": { "type": "string" }, "url": { "type": "string" },
            } } } },
        });
        let names = vec!["linear".to_owned()];
        narrow_path_parameter(&mut doc, "model", &names);
        narrow_property(&mut doc, "Registration", "model", &names);
        narrow_property(&mut doc, "Missing", "model", &names);
        let parameters = &doc["paths"]["/v2/models/{model}"]["get"]["parameters"];
        assert_eq!(parameters[0]["schema"]["enum"], json!(["linear"]));
        assert_eq!(parameters[1]["schema"], json!({ "type": "string" }));
        let properties = &doc["components"]["schemas"]["Registration"]["properties"];
        assert_eq!(properties["model"]["enum"], json!(["linear"]));
        assert_eq!(properties["url"], json!({ "type": "string" }));
    }
}
