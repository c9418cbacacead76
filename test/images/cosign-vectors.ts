/**
 * Signatures made by Sigstore's Go implementation (the code `cosign sign-blob` and `cosign verify-blob` run), copied
 * here so that tests never read anything outside the repository:
 *
 * SIGN_BLOB: a `cosign sign-blob` signature over a file, with the public key it verifies with.
 *   From edgelesssys/constellation internal/sigstore/verify_test.go (commit 050e8fdc4a64e462076401ee642e210b7364319c),
 *   the test of Constellation's check of its cosign-signed measurements ("good verification" and "valid content and
 *   sig, but mismatching public key").
 *
 * DSSE: an ECDSA P-256 signature made by cosign's own test suite over a DSSE pre-authentication encoding, with its key.
 *   From sigstore/cosign cmd/cosign/cli/verify/verify_blob_attestation_test.go (commit
 *   d6d86c224e5899b54f56cbb063b79dc43abc11c2): `pubkey` and the signature inside `blobSLSAProvenanceSignature`.
 *   The signed bytes are the DSSE PAE of the envelope's payload, rebuilt in the test.
 */

export const SIGN_BLOB = {
  content: 'This is some content to be signed!\n',
  signature: 'MEUCIQDzMN3yaiO9sxLGAaSA9YD8rLwzvOaZKWa/bzkcjImUFAIgXLLGzClYUd1dGbuEiY3O/g/eiwQYlyxqLQalxjFmz+8=',
  publicKey: `-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAElWUhon39eAqzEC+/GP03oY4/MQg+
gCDlEzkuOCybCHf+q766bve799L7Y5y5oRsHY1MrUCUwYF/tL7Sg7EYMsA==
-----END PUBLIC KEY-----`,
  otherPublicKey: `-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEFARL653CK4xicoxqwr4M9A2A/3hz
hQaKKRsnjc2LITnxKYmQ4CYqTOAMfZ3agxpW/ndillUox4eDYcidZSXvWw==
-----END PUBLIC KEY-----`,
};

export const DSSE = {
  publicKey: `-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAESF79b1ToAtoakhBOHEU5UjnEiihV
gZPFIp557+TOoDxf14FODWc+sIPETk0OgCplAk60doVXbCv33IU4rXZHrg==
-----END PUBLIC KEY-----
`,
  payloadType: 'application/vnd.in-toto+json',
  payload:
    '{"_type":"https://in-toto.io/Statement/v0.1","predicateType":"https://slsa.dev/provenance/v0.2","subject":[{"name":"blob","digest":{"sha256":"658781cd4ed9bca60dacd09f7bb914bb51502e8b5d619f57f39a1d652596cc24"}}],"predicate":{"builder":{"id":"2"},"buildType":"x","invocation":{"configSource":{}}}}',
  signature: 'MEUCIA8KjZqkrt90fzBojSwwtj3Bqb41E6ruxQk97TLnpzdYAiEAzOAjOTzyvTHqbpFDAn6zhrg6EZv7kxK5faRoVGYMh2c=',
};

/** cosign's own release public key (sigstore/cosign release/release-cosign.pub, same commit): a P-256 SPKI PEM. */
export const COSIGN_RELEASE_PUBLIC_KEY = `-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEhyQCx0E9wQWSFI9ULGwy3BuRklnt
IqozONbbdbqz11hlRJy9c7SG+hdcFl9jE9uE/dwtuwU2MqU9T/cN0YkWww==
-----END PUBLIC KEY-----
`;
