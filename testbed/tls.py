"""Self-signed TLS for the bed: a CA and a broker certificate for 127.0.0.1 signed by it (PEM files), made with the
``cryptography`` library (an Airflow dependency: no openssl or keytool needed). Brokers read the key and chain as a
PEM keystore; clients verify with the CA file (librdkafka ``ssl.ca.location``; the Java client a PEM truststore).
Test material only: unencrypted key, two days of validity."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

#: the subject of the bed's client certificate: the principal a client authenticating with it has on the brokers' mTLS
#: listener (``User:CN=...``)
CLIENT_CN = "mm2-failover-client"


@dataclass(frozen=True)
class Tls:
    ca: Path  # the CA certificate (what clients trust)
    keystore: Path  # the broker's private key + certificate chain, PEM (ssl.keystore.type=PEM)
    client_cert: Path  # a client certificate signed by the CA (CN=CLIENT_CN), for the mTLS listener
    client_key: Path  # its key in the traditional "EC PRIVATE KEY" form librdkafka reads and Java's PEM store does not


def _name(cn: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make(folder: Path, cn: str = "mm2-failover test CA") -> Tls:
    """A new CA and a broker certificate (SAN: IP 127.0.0.1, DNS localhost) in ``folder``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    keystore = folder / "broker-keystore.pem"
    keystore.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        + cert.public_bytes(pem)
        + ca.public_bytes(pem)
    )
    keystore.chmod(0o600)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = (
        x509.CertificateBuilder()
        .subject_name(_name(CLIENT_CN))
        .issuer_name(ca.subject)
        .public_key(client_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (folder / "client.pem").write_bytes(client.public_bytes(pem))
    (folder / "client-key.pem").write_bytes(
        client_key.private_bytes(pem, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption())
    )
    (folder / "client-key.pem").chmod(0o600)
    return Tls(folder / "ca.pem", keystore, folder / "client.pem", folder / "client-key.pem")
