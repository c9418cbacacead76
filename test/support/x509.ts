/**
 * For tests only (a dev dependency): they build throwaway CAs and cross-check our own DER certificates
 * (lib/pki/certificates.ts) with an independent implementation.
 * @peculiar/x509 with its one runtime prerequisite: tsyringe (its dependency-injection container) needs the
 * Reflect metadata polyfill loaded first. Import X.509 / PKCS#10 helpers from here, never from the package directly.
 */
import 'reflect-metadata';

export * from '@peculiar/x509';
