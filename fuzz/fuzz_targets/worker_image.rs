//! Raw image bodies (`Content-Type: image/*`) through a worker's parser: decoding PNG or
//! JPEG of any size and colour, the size limit, grey conversion, resizing and
//! normalisation. An accepted image is one model-sized tensor of finite values; a
//! refused one is a 4xx naming `image`.
#![no_main]
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a fuzz target reports a broken invariant by panicking"
)]

use actix_web::ResponseError as _;
use cocktail_fuzz::{IMAGE, image_preprocessor};
use cocktail_worker::WorkerError;
use cocktail_worker::preprocess::{MAX_IMAGE_SIDE, PixelValues, decode_image};
use cocktail_worker::request::{Prepared, parse_body};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(decoded) = decode_image(data) {
        assert!(decoded.width <= MAX_IMAGE_SIDE && decoded.height <= MAX_IMAGE_SIDE);
        assert_eq!(
            decoded.data.len(),
            (decoded.width * decoded.height * decoded.channels) as usize
        );
    }
    match parse_body(bytes::Bytes::copy_from_slice(data), true, None, &IMAGE) {
        Ok((Prepared::Images(items), request)) => {
            assert_eq!((items.len(), request.id), (1, None));
            let PixelValues::F32(values) = &items[0] else {
                panic!("fashion takes float32")
            };
            assert_eq!(values.len(), image_preprocessor().item_len());
            assert!(values.iter().all(|v| v.is_finite()));
        }
        Ok((Prepared::Tokens(_) | Prepared::Tensors(_), _)) => {
            panic!("an image model made tokens or tensors")
        }
        Err(e) => {
            assert!(e.status_code().is_client_error(), "{e} is not a 4xx");
            assert!(
                matches!(e, WorkerError::InvalidInput { field: "image", .. }),
                "{e:?}"
            );
        }
    }
});
