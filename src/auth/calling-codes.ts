// The country calling code of an E.164 number (ITU-T E.164 assignments). Calling codes form a
// prefix-free set, so the length of a number's code follows from its first digits: 1 (North
// America) and 7 (Russia, Kazakhstan) are one digit, the two-digit codes are listed below, and
// every other code is three digits.
const TWO_DIGIT_CODES = new Set([
  '20', '27', '30', '31', '32', '33', '34', '36', '39', '40', '41', '43', '44', '45', '46', '47', '48', '49',
  '51', '52', '53', '54', '55', '56', '57', '58', '60', '61', '62', '63', '64', '65', '66',
  '81', '82', '84', '86', '90', '91', '92', '93', '94', '95', '98',
]);

/** "+14155550123" -> "1", "+447700900123" -> "44", "+35121234567" -> "351". The number must be E.164. */
export function callingCodeOf(e164: string): string {
  const digits = e164.slice(1);
  if (digits[0] === '1' || digits[0] === '7') return digits[0];
  return TWO_DIGIT_CODES.has(digits.slice(0, 2)) ? digits.slice(0, 2) : digits.slice(0, 3);
}

/** Whether a string is a calling code by the same rule ("1", "44", "351"; not "4" or "440"). */
export function isCallingCode(code: string): boolean {
  return /^[1-9][0-9]{0,2}$/.test(code) && callingCodeOf(`+${code}000000`) === code;
}
