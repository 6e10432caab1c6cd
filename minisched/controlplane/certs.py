"""Certificates for a test control plane, made the way controller-runtime's envtest makes them.

One small CA signs everything: the API server's serving certificate (localhost, 127.0.0.1) and the
client certificates users authenticate with. The API server maps a client certificate to a user by
its subject: CN is the user name, each O is a group. So `issue_client(user, groups)` mints any
identity, e.g. an admin in system:masters, or an RBAC-limited service identity.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Clock skew between us and the API server is nil (same machine), but back-date a little anyway.
_BACKDATE = dt.timedelta(minutes=5)
_VALIDITY = dt.timedelta(days=7)


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM private key."""

    cert_pem: bytes
    key_pem: bytes


def _new_tls_key() -> ec.EllipticCurvePrivateKey:
    # ECDSA P-256: generated in microseconds (RSA 2048 takes ~100 ms each) and accepted by Go and OpenSSL.
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class CertificateAuthority:
    """A self-signed CA that issues serving and client certificates."""

    def __init__(self, common_name: str = "minisched-controlplane-ca") -> None:
        self._key = _new_tls_key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = _now()
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        """The CA's private key: kube-controller-manager signs certificate requests with it, as kubeadm's does."""
        return _key_pem(self._key)

    def _issue(
        self,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        dns_names: Sequence[str] = (),
        ip_addresses: Sequence[str] = (),
    ) -> KeyPair:
        key = _new_tls_key()
        now = _now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_encipherment=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    content_commitment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
        )
        if dns_names or ip_addresses:
            names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
            names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def issue_serving(
        self, dns_names: Sequence[str] = ("localhost",), ip_addresses: Sequence[str] = ("127.0.0.1",)
    ) -> KeyPair:
        """A TLS server certificate valid for the given names."""
        subject = x509.Name(
            [x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0] if dns_names else "server")]
        )
        return self._issue(subject, ExtendedKeyUsageOID.SERVER_AUTH, dns_names, ip_addresses)

    def issue_client(self, user: str, groups: Sequence[str] = ()) -> KeyPair:
        """A client certificate the API server reads as user `user` in `groups`."""
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        return self._issue(x509.Name(attributes), ExtendedKeyUsageOID.CLIENT_AUTH)


def service_account_key_pair() -> KeyPair:
    """The RSA key pair the API server signs (private) and verifies (public) service-account tokens with.

    Returned as KeyPair(cert_pem=<public key PEM>, key_pem=<private key PEM>)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return KeyPair(public, _key_pem(key))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
