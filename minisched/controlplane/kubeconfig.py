"""Write kubeconfig files that embed the CA and a client certificate."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from minisched.controlplane.certs import KeyPair, b64


def kubeconfig_dict(server: str, ca_pem: bytes, client: KeyPair, user: str, context: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": context, "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(client.cert_pem),
                    "client-key-data": b64(client.key_pem),
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": context, "user": user}}],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(
    path: Path, server: str, ca_pem: bytes, client: KeyPair, user: str, context: str = "minisched-local"
) -> Path:
    """Write the kubeconfig readable only by us (it holds a private key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(kubeconfig_dict(server, ca_pem, client, user, context), sort_keys=False)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    return path
