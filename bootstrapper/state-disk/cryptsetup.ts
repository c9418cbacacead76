/**
 * The state disk of cloud node images: a block device encrypted with LUKS2 through cryptsetup, behind the same
 * StateDisk interface. Not implemented in this build: there is no cryptsetup (and no block device to spare) on the
 * machines this project is built and tested on, and a LUKS path that was never run is worse than none. The mapping:
 *
 *   uuid            `cryptsetup luksUUID <device>` (the LUKS2 header is plaintext, so the UUID is readable before the key)
 *   isFormatted()   `cryptsetup isLuks <device>`
 *   format(key)     `cryptsetup luksFormat --type luks2 --cipher aes-xts-plain64 --key-size 512 --key-file -` with the
 *                   disk key on stdin, then mkfs on the opened mapping
 *   unlock(key)     `cryptsetup open --key-file - <device> state`; LUKS rejects a wrong key ("No key available")
 *   mountPoint      the file system (ext4) on /dev/mapper/state, mounted there; readFile/writeFile below it
 *   close()         unmount, `cryptsetup close state`
 */
import { StateDiskError, type StateDisk } from './types.js';

export async function cryptsetupStateDisk(device: string): Promise<StateDisk> {
  throw new StateDiskError(`LUKS state disks (cryptsetup) are not available on this machine; cannot open ${device}.`, {
    hint: 'Local process nodes use an encrypted directory (openGocryptfsStateDisk); LUKS is for cloud node images.',
  });
}
