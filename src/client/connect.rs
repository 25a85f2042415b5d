//! The connection under the client: rustls with the web roots plus `--ca-file` (or no check at
//! all under `--insecure`), one time limit over TCP connect and TLS handshake together, and a
//! flag per connection saying whether it has served a response (a failure on a reused
//! connection is retried once, see `client::follow`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};

use super::ClientError;
use crate::debug::{self, step};

/// Accepts any certificate (`--insecure`), but still checks that the handshake is signed by the
/// key of the certificate presented, with the provider's algorithms.
#[derive(Debug)]
pub(super) struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

pub(super) fn tls_config(
    ca_file: Option<&std::path::Path>,
    insecure: bool,
) -> Result<rustls::ClientConfig, ClientError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let err = |reason: String| ClientError::CaFile {
            path: path.display().to_string(),
            reason,
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| err(e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| err(e.to_string()))?;
        if certs.is_empty() {
            return Err(err("no certificate found".into()));
        }
        for c in certs {
            roots.add(c).map_err(|e| err(e.to_string()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    Ok(if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        // Verification on: web roots plus --ca-file, names checked against the URL's host.
        builder.with_root_certificates(roots).with_no_client_auth()
    })
}

/// The connect timeout fired (TCP connect + TLS handshake).
#[derive(Debug, thiserror::Error)]
#[error("connect timed out after {0:?}")]
pub(super) struct ConnectTimedOut(Duration);

/// Bounds the whole connector (TCP and TLS) in time.
#[derive(Clone)]
pub(super) struct TimeoutConnector<C> {
    pub(super) inner: C,
    pub(super) timeout: Duration,
}

pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Whether a connection has delivered a response head: set on the connection's metadata, so a
/// request that fails can tell a reused connection from a fresh one.
#[derive(Clone, Debug, Default)]
pub(super) struct Served(Arc<AtomicBool>);

impl Served {
    /// The flag of the connection `meta` describes, if it carries one.
    pub(super) fn of(meta: &Connected) -> Option<Served> {
        let mut ext = http::Extensions::new();
        meta.get_extras(&mut ext);
        ext.remove::<Served>()
    }
    pub(super) fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    pub(super) fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A connection with its [`Served`] flag; reads and writes go straight through.
pub(super) struct Tracked<T> {
    io: T,
    served: Served,
}

impl<T: Connection> Connection for Tracked<T> {
    fn connected(&self) -> Connected {
        self.io.connected().extra(self.served.clone())
    }
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for Tracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for Tracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

impl<C> tower_service::Service<Uri> for TimeoutConnector<C>
where
    C: tower_service::Service<Uri> + Send,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
    C::Response: Send + 'static,
{
    type Response = Tracked<C::Response>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        // Only with -v: the target and the clock of the debug line.
        let shown = debug::on().then(|| {
            let target = uri
                .authority()
                .map_or_else(|| uri.to_string(), ToString::to_string);
            (target, Instant::now())
        });
        let fut = self.inner.call(uri);
        let timeout = self.timeout;
        Box::pin(async move {
            let r = match tokio::time::timeout(timeout, fut).await {
                Ok(r) => r
                    .map(|io| Tracked {
                        io,
                        served: Served::default(),
                    })
                    .map_err(Into::into),
                Err(_) => Err(Box::new(ConnectTimedOut(timeout)) as BoxError),
            };
            if let Some((target, t0)) = shown {
                let how = match &r {
                    Ok(_) => "open".to_owned(),
                    Err(e) => format!("failed ({e})"),
                };
                step!("connect {target}: {how} in {}", debug::ms(t0.elapsed()));
            }
            r
        })
    }
}
