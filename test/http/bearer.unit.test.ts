// bearerToken: the one parser of `Authorization: Bearer <token>`.
import t from 'tap';
import { bearerToken } from '../../src/http/bearer.js';

t.test('the token of "Bearer <token>"', async (t) => {
  t.equal(bearerToken('Bearer abc.def.ghi'), 'abc.def.ghi');
  t.equal(bearerToken('Bearer sk-1'), 'sk-1');
});

t.test('the scheme is case-insensitive', async (t) => {
  t.equal(bearerToken('bearer tok'), 'tok');
  t.equal(bearerToken('BEARER tok'), 'tok');
  t.equal(bearerToken('BeArEr tok'), 'tok');
});

t.test('several spaces after the scheme and trailing spaces are accepted', async (t) => {
  t.equal(bearerToken('Bearer    tok'), 'tok');
  t.equal(bearerToken('Bearer tok   '), 'tok');
});

t.test('no header is null', async (t) => {
  t.equal(bearerToken(undefined), null);
});

t.test('anything but one Bearer token is null', async (t) => {
  for (const value of ['', 'Bearer', 'Bearer ', 'Bearer  ', 'Basic dXNlcjpwYXNz', 'Token tok', 'Bearertok', ' Bearer tok', 'Bearer tok extra', 'Bearer\ttok', 'Bearer tok\t', 'Bearer tok\n']) {
    t.equal(bearerToken(value), null, JSON.stringify(value));
  }
});

t.test('the token is returned as sent, whatever its characters', async (t) => {
  t.equal(bearerToken('Bearer a/b+c=='), 'a/b+c==');
  t.equal(bearerToken('Bearer ünïcode'), 'ünïcode');
});
