/**
 * The node program of a cloud-in-a-box VM: the production node program (bootstrapper/main.ts startNode on the
 * provider's NodePlatform: that cloud's metadata service, TPM, issuer, join service, kubeadm backend) with what a
 * test machine lacks put in by the test, and nothing else:
 *   - the kernel's TEE interface: configfs-tsm emulated in process, signing SEV-SNP reports with the test's VCEK/VLEK
 *     (or, for the refusal cases, with an untrusted key, or with REPORT_DATA that does not bind the AK);
 *   - the AMD roots the node's join service trusts: the test's ARK (the test option that makes the test chain count);
 *     on Azure also the roots of IMDS's attested documents: the fake IMDS's test PKI;
 *   - the LUKS2 state disk without device-mapper: real cryptsetup headers and key checks, its mount point a folder;
 *   - Kubernetes: the `none` backend with its etcd cluster store (a kubeadm node's store is the Kubernetes API, and
 *     nothing here runs an API server);
 *     with kubernetesBackend 'kubeadm' the stand-in kubeadm on PATH, its folders below the node's;
 *   - Azure: a static ARM token where the VM's managed identity would get one.
 * Run as `node --import tsx node-program.ts <config.json>`; logs JSON lines to stdout; SIGTERM stops it.
 */
import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { AmdRoots } from '../../../lib/attestation/snp/certs.js';
import type { SnpProduct, TcbVersion } from '../../../lib/attestation/snp/report.js';
import { loadProvider } from '../../../providers/registry.js';
import { runNodeProgram, startNode } from '../../../bootstrapper/main.js';
import { openLuksStateDisk, testPassphraseActivator } from '../../../bootstrapper/state-disk.js';
import { certificatesDer } from '../../../lib/attestation/snp/certs.js';
import { emulatedTsm, snpGuest } from '../../attestation/support/emulated-tee.js';
import type { SnpTestCa } from '../../attestation/snp/fixtures.js';

export interface BoxTee {
  product: SnpProduct;
  kind: 'vcek' | 'vlek';
  /** The endorsement key: private key and certificate (PEM), its chip id (hex) and TCB. */
  keyPem: string;
  certPem: string;
  chipIdHex: string;
  tcb: TcbVersion;
  /** ASK (or ASVK) and ARK handed out with the report, PEM. */
  askPem: string;
  arkPem: string;
  /** Fixed REPORT_DATA (hex) instead of what the node asks for: a report that does not bind the AK. */
  reportDataHex?: string;
}

export interface BoxNodeConfig {
  provider: string;
  variant: string;
  paths: { tpm: string; nodeDir: string; stateDisk: string; stateDir: string };
  providerOptions: Record<string, unknown>;
  tee?: BoxTee;
  /** The AMD roots this node's join service trusts (the test chain). */
  trustedRoots: AmdRoots;
  /** Azure: the roots of IMDS's attested documents this node's join service trusts (the fake IMDS's test PKI). */
  imdsRoots?: string[];
  kubeadm: { pkiDir: string; adminConf: string; env: Record<string, string> };
  /**
   * The Kubernetes backend instead of the platform's (kubeadm on every cloud). The box runs `none`, whose nodes keep
   * the cluster store in etcd: a kubeadm node keeps it in the Kubernetes API, and nothing here runs an API server.
   */
  kubernetesBackend?: 'none' | 'kubeadm';
  /** The image the VM booted (the cloud's image id); the node reports it as its image version. */
  imageVersion?: string;
}

const der = (pem: string) => ({ der: certificatesDer(pem)[0], pem });

function teeOf(tee: BoxTee) {
  const key = {
    cert: der(tee.certPem),
    privateKey: createPrivateKey(tee.keyPem),
    chipId: new Uint8Array(Buffer.from(tee.chipIdHex, 'hex')),
    tcb: tee.tcb,
  };
  const ca = { ask: der(tee.askPem), asvk: der(tee.askPem), ark: der(tee.arkPem) } as unknown as SnpTestCa;
  const fields = tee.reportDataHex ? { reportData: new Uint8Array(Buffer.from(tee.reportDataHex, 'hex')) } : {};
  return { tsm: emulatedTsm(snpGuest(ca, key, tee.kind, fields)) };
}

function run(configFile: string): Promise<void> {
  return runNodeProgram(async (context) => {
    const config = JSON.parse(readFileSync(configFile, 'utf8')) as BoxNodeConfig;
    const provider = await loadProvider(config.provider);
    const base = await provider.nodePlatform!({
      variant: config.variant,
      paths: config.paths,
      providerOptions: config.providerOptions,
      tee: config.tee ? teeOf(config.tee) : undefined,
      imageVersion: config.imageVersion,
    });
    const platform = {
      ...base,
      kubernetesBackend: config.kubernetesBackend ?? base.kubernetesBackend,
      validatorDeps: async () => ({
        ...(await base.validatorDeps()),
        amdRoots: config.trustedRoots,
        ...(config.imdsRoots ? { azureImdsRoots: config.imdsRoots } : {}),
      }),
    };
    return startNode({
      ...context,
      platform,
      openStateDisk: (p) =>
        openLuksStateDisk(p.stateDisk.kind === 'luks' ? p.stateDisk.device : p.stateDisk.diskDir, {
          mountPoint: p.stateDisk.mountPoint,
          activator: testPassphraseActivator(),
        }),
      backend: { pkiDir: config.kubeadm.pkiDir, adminConfPath: config.kubeadm.adminConf, env: config.kubeadm.env },
      overrides: { retry: { initialMs: 100, maxMs: 500, unreachableMaxMs: 200 } },
    });
  });
}

void run(process.argv[2] ?? '');
