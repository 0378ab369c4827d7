import t from 'tap';
import { allowedOrigin, DEFAULT_CORS, preflightHeaders } from '../../src/http/cors.js';

t.test('the default (any origin, with credentials) echoes the request\'s origin', async (t) => {
  t.equal(allowedOrigin(DEFAULT_CORS, 'https://web.mydomain.fr'), 'https://web.mydomain.fr');
  t.equal(allowedOrigin(DEFAULT_CORS, undefined), null, 'no origin, no header');
});

t.test('any origin without credentials is "*"', async (t) => {
  t.equal(allowedOrigin({ ...DEFAULT_CORS, credentials: false }, 'https://x.test'), '*');
});

t.test('"localhost" reflects loopback origins only', async (t) => {
  const policy = { ...DEFAULT_CORS, origins: 'localhost' };
  for (const origin of ['http://localhost', 'http://localhost:8080', 'http://127.0.0.1:3000', 'http://[::1]', 'http://[::1]:3000']) {
    t.equal(allowedOrigin(policy, origin), origin, origin);
  }
  for (const origin of ['http://web.mydomain.fr', 'http://notlocalhost', 'http://localhost.evil.com', 'not a url']) {
    t.equal(allowedOrigin(policy, origin), null, origin);
  }
});

t.test('one configured origin is sent as it is', async (t) => {
  t.equal(allowedOrigin({ ...DEFAULT_CORS, origins: 'https://app.test' }, 'https://other.test'), 'https://app.test');
});

t.test('the preflight carries credentials, methods and headers', async (t) => {
  t.same(preflightHeaders({ origins: '*', methods: 'GET', headers: 'Authorization', credentials: false }), {
    'Access-Control-Allow-Credentials': 'false',
    'Access-Control-Allow-Methods': 'GET',
    'Access-Control-Allow-Headers': 'Authorization',
  });
});
