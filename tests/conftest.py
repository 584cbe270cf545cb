"""Shared fixtures: a real podfit server on a loopback port with in-memory telemetry."""

from __future__ import annotations

import datetime
import ipaddress
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from podfit.client import AsyncClient
from podfit.server.app import RunningServer, create_server
from podfit.server.settings import Settings
from podfit.server.telemetry import Telemetry


@dataclass
class LiveServer:
    running: RunningServer
    client: AsyncClient
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.running.port}"

    @property
    def extender_url(self) -> str:
        return f"http://127.0.0.1:{self.running.extender_port}/scheduler"


async def start_live_server(settings: Settings | None = None, **client_options: object) -> LiveServer:
    spans = InMemorySpanExporter()
    metrics = InMemoryMetricReader()
    telemetry = Telemetry(span_exporters=[spans], metric_readers=[metrics], batch_spans=False)
    running = await create_server(
        settings or Settings(), addr="127.0.0.1:0", extender_addr="127.0.0.1:0", telemetry=telemetry
    )
    client = AsyncClient(f"127.0.0.1:{running.port}", **client_options)  # type: ignore[arg-type]
    return LiveServer(running, client, spans, metrics)


@pytest.fixture(autouse=True)
def podfit_logging_restored() -> Iterator[None]:
    """podfit-server's main() points the podfit logger at the stderr of its moment (a test's captured
    stream, closed afterwards) and stops propagation: each test gets the logger back as it found it."""
    logger = logging.getLogger("podfit")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


@pytest.fixture
async def live() -> AsyncIterator[LiveServer]:
    server = await start_live_server(Settings(extender_bind=True))
    yield server
    await server.client.close()
    await server.running.stop(0)


# -- a test PKI: a CA, a server certificate for localhost and a client certificate -------------------


def issue_certificate(
    subject: str,
    issuer_key: ec.EllipticCurvePrivateKey | None,
    issuer: x509.Name | None,
    ca: bool,
    loopback_ip: bool = False,
):
    """A key and certificate; a leaf names ``localhost`` and ``subject`` (and 127.0.0.1 with
    ``loopback_ip``: the suite's own certificate deliberately does not, to test a name mismatch)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.DNSName(subject)]
                + ([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))] if loopback_ip else [])
            ),
            critical=False,
        )
    cert = builder.sign(issuer_key or key, hashes.SHA256())
    return key, cert


def pem_bytes(key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> tuple[bytes, bytes]:
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("pki")
    ca_key, ca_cert = issue_certificate("podfit-test-ca", None, None, ca=True)
    files: dict[str, Path] = {}
    for name in ("server", "client"):
        key, cert = issue_certificate("localhost" if name == "server" else "feeder", ca_key, ca_cert.subject, ca=False)
        key_pem, cert_pem = pem_bytes(key, cert)
        (base / f"{name}.key").write_bytes(key_pem)
        (base / f"{name}.crt").write_bytes(cert_pem)
        files[f"{name}_key"], files[f"{name}_cert"] = base / f"{name}.key", base / f"{name}.crt"
    files["ca"] = base / "ca.crt"
    files["ca"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    return files
