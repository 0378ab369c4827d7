// The one type every part of the native surface shares.

/** A token id of the model's vocabulary. */
export type Token = number;
