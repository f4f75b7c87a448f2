//! JWT bearer tokens on `rookery serve --auth FILE --jwt-jwks FILE --jwt-hs256-secret-env VAR`,
//! through the built binary: a listed subject is that principal, an unlisted one gets the file's
//! defaults and the role its claim says; expired, not yet valid, wrong issuer or audience, wrong
//! key, `alg: none`, HS256 signed with the public key (algorithm confusion) and a tampered
//! payload all get the same 401 `unauthorized` body.

use crate::common::serve as harness;

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use harness::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The key the server's JWKS holds (Ed25519, test only).
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEICcOhL6QAFGdr4TDli+3eI8pjauoHmjJoXN2TXdQIKGE\n-----END PRIVATE KEY-----\n";
/// Its public half, as the JWKS `x`.
const KEY_X: &str = "rV-g5W_q8XYF81DLTqUv0cNUTIsEnjGzm8uJsL4Qlzo";
/// Another Ed25519 key the server does not know.
const OTHER_KEY: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIFxbP5nR/gXsyVTXvpvQOrehctbqKGxc89DV1CvcvuUl\n-----END PRIVATE KEY-----\n";
const SECRET: &str = "hs256-test-secret-0123456789abcdef";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims(sub: &str) -> Value {
    json!({"sub": sub, "iss": "issuer-1", "aud": "rookery", "exp": now() + 600, "nbf": now() - 10})
}

fn ed(claims: &Value, pem: &str) -> String {
    // The PKCS#8 DER inside the PEM.
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let key = EncodingKey::from_ed_der(
        &base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap(),
    );
    encode(&Header::new(Algorithm::EdDSA), claims, &key).unwrap()
}

fn hs(claims: &Value, secret: &[u8]) -> String {
    let key = EncodingKey::from_secret(secret).unwrap();
    encode(&Header::new(Algorithm::HS256), claims, &key).unwrap()
}

async fn get(s: &Server, token: &str, path: &str) -> (StatusCode, Value) {
    s.send(s.client.get(format!("{}{path}", s.base)).bearer_auth(token))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwts_authenticate_and_every_bad_one_gets_the_same_401() {
    let dir = sandbox(&json!({"turns": [{"text": "done"}]}));
    let auth = dir.path().join("auth.yaml");
    std::fs::write(
        &auth,
        "max_sessions: 2\nprincipals:\n  - name: alice\n    role: user\n    max_sessions: 1\n",
    )
    .unwrap();
    let jwks = dir.path().join("jwks.json");
    let set = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": KEY_X, "kid": "k1"}]});
    std::fs::write(&jwks, set.to_string()).unwrap();
    let (auth, jwks) = (
        auth.to_str().unwrap().to_string(),
        jwks.to_str().unwrap().to_string(),
    );
    let s = Server::start_env(
        dir,
        None,
        &[
            "--auth",
            &auth,
            "--jwt-jwks",
            &jwks,
            "--jwt-hs256-secret-env",
            "TEST_JWT_SECRET",
            "--jwt-issuer",
            "issuer-1",
            "--jwt-audience",
            "rookery",
        ],
        None,
        &[("TEST_JWT_SECRET", SECRET)],
    );

    // A listed subject is that principal (its file role, its own limits).
    let alice = ed(&claims("alice"), KEY);
    let (status, v) = s
        .send(
            s.client
                .post(format!("{}/v1/sessions", s.base))
                .bearer_auth(&alice)
                .json(&json!({"workspace": s.ws()})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let id = v["session_id"].as_str().unwrap().to_string();
    let (status, v) = s
        .send(
            s.client
                .post(format!("{}/v1/sessions", s.base))
                .bearer_auth(&alice)
                .json(&json!({"workspace": s.ws()})),
        )
        .await;
    assert_eq!(
        (status, v["error"]["limit"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("max_sessions")),
        "{v}"
    );
    // An unlisted subject: a user by default, an admin when its role claim says so (HS256).
    let mut carol = claims("carol");
    let (status, v) = get(
        &s,
        &hs(&carol, SECRET.as_bytes()),
        &format!("/v1/sessions/{id}"),
    )
    .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown_session")),
        "{v}"
    );
    carol["role"] = json!("admin");
    let (status, v) = get(
        &s,
        &hs(&carol, SECRET.as_bytes()),
        &format!("/v1/sessions/{id}"),
    )
    .await;
    assert_eq!(
        (status, v["owner"].as_str()),
        (StatusCode::OK, Some("alice")),
        "{v}"
    );
    // A listed subject's role comes from the file, not the claim.
    let mut alice_admin = claims("alice");
    alice_admin["role"] = json!("admin");
    let (_, v) = get(&s, &ed(&alice_admin, KEY), "/v1/sessions").await;
    assert_eq!(v["sessions"].as_array().unwrap().len(), 1, "{v}");

    let mut bad = Vec::new();
    let mut c = claims("alice");
    c["exp"] = json!(now() - 120);
    bad.push(("expired", ed(&c, KEY)));
    let mut c = claims("alice");
    c["nbf"] = json!(now() + 120);
    bad.push(("not yet valid", ed(&c, KEY)));
    let mut c = claims("alice");
    c["iss"] = json!("issuer-2");
    bad.push(("wrong issuer", ed(&c, KEY)));
    let mut c = claims("alice");
    c["aud"] = json!("elsewhere");
    bad.push(("wrong audience", ed(&c, KEY)));
    let mut c = claims("alice");
    c.as_object_mut().unwrap().remove("exp");
    bad.push(("no exp", ed(&c, KEY)));
    bad.push(("wrong key", ed(&claims("alice"), OTHER_KEY)));
    bad.push(("wrong secret", hs(&claims("alice"), b"another-secret")));
    let payload = B64.encode(claims("alice").to_string());
    bad.push((
        "alg none",
        format!("{}.{payload}.", B64.encode(r#"{"alg":"none","typ":"JWT"}"#)),
    ));
    bad.push((
        "alg none, signed",
        format!("{}.{payload}.c2ln", B64.encode(r#"{"alg":"none"}"#)),
    ));
    // HS256 "signed" with the public key: the raw key and its JWK text.
    bad.push((
        "HS256 with the public key",
        hs(&claims("alice"), &B64.decode(KEY_X).unwrap()),
    ));
    bad.push((
        "HS256 with the JWK",
        hs(&claims("alice"), set["keys"][0].to_string().as_bytes()),
    ));
    let mut hs_kid = Header::new(Algorithm::HS256);
    hs_kid.kid = Some("k1".into());
    let x_secret = EncodingKey::from_secret(KEY_X.as_bytes()).unwrap();
    bad.push((
        "HS256 with kid k1",
        encode(&hs_kid, &claims("alice"), &x_secret).unwrap(),
    ));
    // A valid token whose payload is swapped for another subject's.
    let parts: Vec<String> = alice.split('.').map(str::to_string).collect();
    let forged = B64.encode(claims("root").to_string());
    bad.push((
        "tampered payload",
        format!("{}.{forged}.{}", parts[0], parts[2]),
    ));
    bad.push(("not a JWT", "a.b.c".to_string()));
    let mut bodies = Vec::new();
    for (what, token) in &bad {
        let (status, v) = get(&s, token, "/v1/sessions").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {v}");
        bodies.push(v);
    }
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "one body for all: {bodies:?}"
    );
    assert_eq!(bodies[0]["error"]["code"], "unauthorized");
}
