/** `node --import tsx/esm --import ./extra-variant-register.mjs`: appends the row in $EXTRA_VARIANT_ROW to the variant table. */
import { register } from 'node:module';

register('./extra-variant-hooks.mjs', import.meta.url, { data: { row: process.env.EXTRA_VARIANT_ROW } });
