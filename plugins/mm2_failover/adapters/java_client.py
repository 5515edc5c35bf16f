"""A Kafka connection's librdkafka settings (the connection's extra, what confluent-kafka reads) as the Java client's:
for Spark's Kafka source and the Java helper (``jvm/KafkaOffsets.java``). One connection, both clients, no second
set of settings to keep in step. The rules, each one function below:

1. Names that mean the same in both pass as they are (:data:`SAME_IN_JAVA`); ``sasl.mechanisms`` is ``sasl.mechanism``;
   librdkafka's ``ssl.endpoint.identification.algorithm=none`` is the Java client's ``""``.
2. SASL PLAIN and SCRAM: ``sasl.username``/``sasl.password`` as the login module's ``sasl.jaas.config``.
3. The CA: ``ssl.ca.location`` (a PEM file) or ``ssl.ca.pem`` as a PEM truststore; ``probe``: the JVM's own CAs.
4. mTLS: the client's certificate and key (``ssl.certificate.location``/``ssl.key.location``, or their inline ``.pem``
   forms, with ``ssl.key.password`` when the key is encrypted) as a PEM keystore given inline. The Java client reads
   only PKCS#8 keys; a key in another PEM form librdkafka accepts (PKCS#1 ``RSA PRIVATE KEY``, ``EC PRIVATE KEY``,
   encrypted or not) is converted, unencrypted, into the settings' private file. A PKCS#12 keystore
   (``ssl.keystore.location``/``ssl.keystore.password``) passes as one.
5. OAUTHBEARER with ``sasl.oauthbearer.method=oidc`` (client credentials): Kafka's own login callback handler, the
   token endpoint, and client id, secret, scope and extensions in the JAAS line; the token endpoint is also a system
   property of the JVM (:func:`java_system_properties`: Kafka 4 refuses a URL not listed there).
6. OAUTHBEARER with librdkafka's unsecured JWT (``enable.sasl.oauthbearer.unsecure.jwt=true`` and
   ``sasl.oauthbearer.config="principal=... scope=... lifeSeconds=... extension_x=..."``): Kafka's unsecured login
   options (a test or development setup; brokers validate such tokens only with the unsecured validator).
7. GSSAPI (Kerberos): ``sasl.kerberos.principal`` and ``sasl.kerberos.keytab`` as ``Krb5LoginModule`` (a keytab;
   without one, the ticket cache); ``sasl.kerberos.service.name`` as it is, ``kafka`` (librdkafka's default) unset.
8. The deployment's ``[mm2_failover] spark_kafka_options`` (formerly ``MM2_FAILOVER_SPARK_KAFKA_OPTIONS``; a JSON
   object of Java settings) is merged over the result: for what no rule
   maps. OAUTHBEARER that no rule maps and the variable does not give is refused, naming what to set.

The result contains secrets: it goes into a 0600 file only (never a command line or a log).
"""

from __future__ import annotations

import json
from pathlib import Path

from mm2_failover.adapters.config import setting, setting_label

OVERRIDES_VAR = "MM2_FAILOVER_SPARK_KAFKA_OPTIONS"

#: librdkafka settings whose names and meaning are the same in the Java client (rule 1)
SAME_IN_JAVA = (
    "security.protocol",
    "sasl.mechanism",
    "ssl.endpoint.identification.algorithm",
    "sasl.kerberos.service.name",
    "client.id",
)
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OAUTH_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
KERBEROS = "com.sun.security.auth.module.Krb5LoginModule"
ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"


def jaas_quote(v) -> str:
    """A value inside a JAAS quoted string (Kafka's JaasConfig reads it with a StreamTokenizer)."""
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")


def jaas(module: str, options: dict) -> str:
    return f"{module} required" + "".join(f' {k}="{jaas_quote(v)}"' for k, v in options.items()) + ";"


def mechanism(conf: dict) -> str:
    return str(conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "").upper()


def same_names(conf: dict) -> dict[str, str]:
    """Rule 1."""
    out = {k: str(conf[k]) for k in SAME_IN_JAVA if k in conf}
    if out.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        out["ssl.endpoint.identification.algorithm"] = ""  # librdkafka's "none" is the Java client's ""
    if "bootstrap.servers" in conf:
        out["bootstrap.servers"] = str(conf["bootstrap.servers"])
    if "sasl.mechanisms" in conf and "sasl.mechanism" not in out:
        out["sasl.mechanism"] = str(conf["sasl.mechanisms"])
    return out


def password_login(conf: dict) -> dict[str, str]:
    """Rule 2."""
    if "sasl.username" not in conf or mechanism(conf) not in ("", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        return {}
    module = PLAIN if mechanism(conf) in ("", "PLAIN") else SCRAM
    return {
        "sasl.jaas.config": jaas(module, {"username": conf["sasl.username"], "password": conf.get("sasl.password", "")})
    }


def trust(conf: dict) -> dict[str, str]:
    """Rule 3: the CA as a PEM file (``ssl.ca.location``) or inline (``ssl.ca.pem``); ``probe`` (librdkafka's search of
    the system's stores) leaves the JVM's own CAs; a folder of CAs, which the Java client cannot read, is refused."""
    if conf.get("ssl.ca.pem"):
        return {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": str(conf["ssl.ca.pem"])}
    where = str(conf.get("ssl.ca.location") or "")
    if not where or where == "probe":
        return {}
    if Path(where).is_dir():
        raise ValueError(
            f"ssl.ca.location {where} is a folder: the Java client (Spark's Kafka source, commits with metadata) "
            "reads one PEM file; give the CA file (certificates concatenated)"
        )
    return {"ssl.truststore.type": "PEM", "ssl.truststore.location": where}


def _pem(conf: dict, name: str) -> str | None:
    """The PEM text of ``ssl.<name>.pem`` (inline) or ``ssl.<name>.location`` (a file), or None."""
    if conf.get(f"ssl.{name}.pem"):
        return str(conf[f"ssl.{name}.pem"])
    where = conf.get(f"ssl.{name}.location")
    if not where:
        return None
    try:
        return Path(str(where)).read_text()
    except OSError as e:
        raise ValueError(
            f"ssl.{name}.location {where}: cannot be read ({e.strerror or e}); the Java client (Spark's Kafka "
            "source, commits with metadata) needs the file on this worker too"
        ) from None


def pkcs8(key_pem: str, password: str | None) -> str:
    """The key as unencrypted PKCS#8 PEM, the one form the Java client's PEM keystore reads."""
    if "-----BEGIN PRIVATE KEY-----" in key_pem and not password:
        return key_pem
    from cryptography.hazmat.primitives import serialization  # lazy: optional (cryptography)

    try:
        try:
            key = serialization.load_pem_private_key(key_pem.encode(), password.encode() if password else None)
        except TypeError:
            if not password:
                raise
            key = serialization.load_pem_private_key(key_pem.encode(), None)  # OpenSSL ignores it: so do we
    except (ValueError, TypeError) as e:
        raise ValueError(
            f"ssl.key: the client key could not be read ({e}); give a PEM key and, when it is encrypted, "
            "ssl.key.password"
        ) from None
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def client_certificate(conf: dict) -> dict[str, str]:
    """Rule 4."""
    if conf.get("ssl.keystore.location"):
        return {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(conf["ssl.keystore.location"]),
            **(
                {"ssl.keystore.password": str(conf["ssl.keystore.password"])} if "ssl.keystore.password" in conf else {}
            ),
        }
    cert, key = _pem(conf, "certificate"), _pem(conf, "key")
    if cert is None and key is None:
        return {}
    if cert is None or key is None:
        missing = "ssl.certificate.location" if cert is None else "ssl.key.location"
        raise ValueError(f"mTLS: {missing} (or its .pem form) is missing; a client certificate needs both")
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": cert,
        "ssl.keystore.key": pkcs8(key, conf.get("ssl.key.password")),
    }


def _pairs(text: str, sep: str = " ") -> dict[str, str]:
    """``k=v`` pairs: librdkafka's ``sasl.oauthbearer.config`` (space-separated) and ``.extensions`` (``sep=","``)."""
    out = {}
    for part in str(text).split() if sep == " " else str(text).split(sep):
        k, sep, v = part.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def oidc(conf: dict) -> dict[str, str]:
    """Rule 5."""
    if mechanism(conf) != "OAUTHBEARER" or str(conf.get("sasl.oauthbearer.method", "")).lower() != "oidc":
        return {}
    missing = [
        k
        for k in ("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.token.endpoint.url")
        if not conf.get(k)
    ]
    if missing:
        raise ValueError(f"OAUTHBEARER with sasl.oauthbearer.method=oidc: {', '.join(missing)} missing")
    options = {"clientId": conf["sasl.oauthbearer.client.id"], "clientSecret": conf["sasl.oauthbearer.client.secret"]}
    if conf.get("sasl.oauthbearer.scope"):
        options["scope"] = conf["sasl.oauthbearer.scope"]
    for k, v in _pairs(conf.get("sasl.oauthbearer.extensions", ""), ",").items():
        options[f"extension_{k}"] = v
    return {
        "sasl.login.callback.handler.class": OAUTH_LOGIN_HANDLER,
        "sasl.oauthbearer.token.endpoint.url": str(conf["sasl.oauthbearer.token.endpoint.url"]),
        "sasl.jaas.config": jaas(OAUTH, options),
    }


def unsecured_jwt(conf: dict) -> dict[str, str]:
    """Rule 6."""
    if mechanism(conf) != "OAUTHBEARER" or str(conf.get("enable.sasl.oauthbearer.unsecure.jwt", "")).lower() != "true":
        return {}
    given = _pairs(conf.get("sasl.oauthbearer.config", ""))
    if not given.get("principal"):
        raise ValueError(
            'enable.sasl.oauthbearer.unsecure.jwt: sasl.oauthbearer.config must name the principal ("principal=...")'
        )
    options = {"unsecuredLoginStringClaim_sub": given["principal"]}
    if given.get("scope"):
        options["unsecuredLoginListClaim_scope"] = "," + given["scope"]  # the first character is the list's separator
    if given.get("lifeSeconds"):
        options["unsecuredLoginLifetimeSeconds"] = given["lifeSeconds"]
    for k, v in given.items():
        if k.startswith("extension_"):
            options["unsecuredLoginExtension_" + k.removeprefix("extension_")] = v
    return {"sasl.jaas.config": jaas(OAUTH, options)}


def kerberos(conf: dict) -> dict[str, str]:
    """Rule 7."""
    if mechanism(conf) != "GSSAPI":
        return {}
    options = (
        {"useKeyTab": "true", "storeKey": "true", "keyTab": conf["sasl.kerberos.keytab"]}
        if conf.get("sasl.kerberos.keytab")
        else {"useTicketCache": "true"}
    )
    if conf.get("sasl.kerberos.principal"):
        options["principal"] = conf["sasl.kerberos.principal"]
    service = {} if conf.get("sasl.kerberos.service.name") else {"sasl.kerberos.service.name": "kafka"}
    # Krb5LoginModule reads its booleans unquoted
    line = f"{KERBEROS} required" + "".join(
        f" {k}={v}" if v == "true" else f' {k}="{jaas_quote(v)}"' for k, v in options.items()
    )
    return {"sasl.jaas.config": line + ";", **service}  # librdkafka's default service name; the Java client has none


def overrides(env: dict[str, str] | None = None) -> dict[str, str]:
    """Rule 8: the Java settings the deployment gives for what no rule maps (setting ``spark_kafka_options``)."""
    raw = setting("spark_kafka_options", env) or ""
    if not raw:
        return {}
    try:
        given = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"{setting_label('spark_kafka_options', env)}: not a JSON object ({e})") from None
    if not isinstance(given, dict):
        raise ValueError(f"{setting_label('spark_kafka_options', env)}: not a JSON object")
    return {str(k): str(v) for k, v in given.items()}


def java_client_options(conf: dict, env: dict[str, str] | None = None) -> dict[str, str]:
    """The Java client's settings of a connection's librdkafka ``conf`` (rules 1-8). Contains secrets: never log it."""
    out = same_names(conf)
    for rule in (password_login, trust, client_certificate, oidc, unsecured_jwt, kerberos):
        out.update(rule(conf))
    out.update(overrides(env))
    if mechanism(conf) == "OAUTHBEARER" and "sasl.jaas.config" not in out:
        raise ValueError(
            "OAUTHBEARER: the Java client (Spark's Kafka source, commits with metadata) cannot log in with this "
            "connection's settings. Set sasl.oauthbearer.method=oidc with sasl.oauthbearer.client.id, "
            ".client.secret and .token.endpoint.url (or enable.sasl.oauthbearer.unsecure.jwt for a test), or give "
            "the Java client's sasl.jaas.config and login callback handler in [mm2_failover] spark_kafka_options "
            f"(formerly {OVERRIDES_VAR})"
        )
    return out


def java_system_properties(conf: dict) -> dict[str, str]:
    """The JVM's ``-D`` properties the connection needs (rule 5: the token endpoint Kafka 4 must be allowed to call)."""
    url = oidc(conf).get("sasl.oauthbearer.token.endpoint.url")
    return {ALLOWED_URLS: url} if url else {}
