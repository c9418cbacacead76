/**
 * The public key that the measurements of this project's release images are signed with, pinned into the CLI
 * (like Constellation's CosignPublicKeyReleases): a measurements file of a release image is used only when its
 * signature verifies with this key, unless the config names another key (measurementsSigningKey) for images the
 * user signs.
 */
import { trustedKeyFromPem, type TrustedKey } from '../signing-keys.js';

/**
 * ECDSA P-256, SubjectPublicKeyInfo PEM (cosign.pub format); SHA-256 of its DER:
 * 8d03cd76740d9e06d3fe0a86d2c7599bdc972ce7b8ac41277ccb7b9182fb6b53.
 * Its private key is held by whoever signs releases (`cosign sign-blob --key`), never in this repository.
 * Replacing it is a release decision: every CLI built with the old key refuses measurements signed with the new one.
 */
export const RELEASE_MEASUREMENTS_PUBLIC_KEY = `-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEG1OQw6XYB/Uyi19IkDet9FN8pwHy
UPrKJjw8+bp7il2d0KguF6cYXfI0GITRcSkjETCENxyrvOcXr5koeV+JxQ==
-----END PUBLIC KEY-----
`;

export function releaseKey(): TrustedKey {
  return trustedKeyFromPem(RELEASE_MEASUREMENTS_PUBLIC_KEY, 'the release key of this CLI');
}
