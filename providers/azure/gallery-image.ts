/**
 * Before `create` makes anything: the config's image must be a gallery image definition that Azure allows for the
 * variant's VMs. A confidential VM boots only an image definition whose `SecurityType` feature says so
 * (ConfidentialVMSupported, ConfidentialVM or TrustedLaunchAndConfidentialVmSupported); Azure would refuse the
 * scale set only after the network and load balancer were made. A managed image (not in a gallery) carries no such
 * feature, so confidential VMs refuse it too. Trusted launch needs an image marked for trusted launch.
 * Reference: https://learn.microsoft.com/azure/virtual-machines/image-version (features), and
 * https://learn.microsoft.com/azure/confidential-computing/create-confidential-vm-from-compute-gallery.
 * The image forms: /CommunityGalleries/{gallery}/Images/{image}/Versions/{v}, /SharedGalleries/{gallery}/Images/...,
 * /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Compute/galleries/{g}/images/{i}/versions/{v}.
 */
import type { GalleryImageFeature } from '@azure/arm-compute';
import { UserError } from '../../lib/errors.js';
import { requireVariantOn } from '../../lib/attestation/variant.js';
import type { AzureClients } from './clients.js';
import { isNotFound, toUserError } from './errors.js';

const CVM_TYPES = new Set(['confidentialvmsupported', 'confidentialvm', 'trustedlaunchandconfidentialvmsupported']);
const TRUSTED_LAUNCH_TYPES = new Set([
  'trustedlaunch',
  'trustedlaunchsupported',
  'trustedlaunchandconfidentialvmsupported',
]);

/** The image definition's features, or a UserError when the image is no gallery image or cannot be found. */
async function featuresOf(clients: AzureClients, image: string, location: string): Promise<GalleryImageFeature[]> {
  const community = /^\/CommunityGalleries\/([^/]+)\/Images\/([^/]+)/i.exec(image);
  const shared = /^\/SharedGalleries\/([^/]+)\/Images\/([^/]+)/i.exec(image);
  const own =
    /^\/subscriptions\/[^/]+\/resourceGroups\/([^/]+)\/providers\/Microsoft\.Compute\/galleries\/([^/]+)\/images\/([^/]+)/i.exec(
      image,
    );
  try {
    if (community)
      return (await clients.compute.communityGalleryImages.get(location, community[1]!, community[2]!)).features ?? [];
    if (shared) return (await clients.compute.sharedGalleryImages.get(location, shared[1]!, shared[2]!)).features ?? [];
    if (own) return (await clients.compute.galleryImages.get(own[1]!, own[2]!, own[3]!)).features ?? [];
  } catch (err) {
    if (isNotFound(err)) {
      throw new UserError(
        `The image ${image} does not exist in ${location} (or is not shared with this subscription).`,
        {
          hint: "Check the config's image and provider.azure.location: a gallery image must be replicated to that region.",
        },
      );
    }
    throw toUserError(err, `reading the image definition of ${image}`);
  }
  throw new UserError(
    `The image ${image} is not a gallery image, and confidential and trusted-launch VMs boot only gallery images marked for them.`,
    {
      hint: 'Use a Constellation image from a community or shared gallery (/CommunityGalleries/..., /SharedGalleries/...) or a gallery image version of your own.',
    },
  );
}

/** Refuses (a UserError naming the image and its security type) an image the variant's VMs cannot boot. */
export async function checkGalleryImage(
  clients: AzureClients,
  image: string,
  location: string,
  variant: string,
): Promise<void> {
  const cvm = requireVariantOn('azure', variant).cvm;
  const features = await featuresOf(clients, image, location);
  const securityType = features.find((f) => f.name?.toLowerCase() === 'securitytype')?.value ?? '';
  const allowed = cvm ? CVM_TYPES : TRUSTED_LAUNCH_TYPES;
  if (!allowed.has(securityType.toLowerCase())) {
    throw new UserError(
      `The image ${image} is not marked for ${cvm ? 'confidential' : 'trusted-launch'} VMs (its SecurityType is ${securityType || 'not set'}), which ${variant} needs.`,
      {
        hint: cvm
          ? "Use an image definition with SecurityType ConfidentialVMSupported (Constellation's Azure CVM images are)."
          : 'Use an image definition with SecurityType TrustedLaunch or TrustedLaunchSupported.',
      },
    );
  }
}
