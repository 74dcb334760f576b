/**
 * The public API as the page calls it: a token from `POST v1/token`, then bearer-authenticated
 * GETs. Paths are relative to the page, so the page works wherever the service is mounted. A
 * response that is not 2xx becomes an ApiError carrying the service's error object.
 */

/** A failed call: the HTTP status and the service's `{code, message, target?, position?, details?}`. */
export class ApiError extends Error {
  constructor(status, error) {
    super(error.message);
    this.status = status;
    this.error = error;
  }
}

export const urlOf = (path) => new URL(path, document.baseURI);

async function failure(response) {
  let error = { code: `HTTP ${response.status}`, message: response.statusText || 'The service refused the request.' };
  try {
    const body = await response.json();
    if (body && typeof body.error === 'object' && body.error !== null) error = body.error;
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, error);
}

/** An access token for the account, or an ApiError (InvalidCredentials, TooManyLoginAttempts, ...). */
export async function signIn(username, password) {
  const response = await fetch(urlOf('v1/token'), {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ username, password }),
    credentials: 'omit',
  });
  if (!response.ok) throw await failure(response);
  return (await response.json()).access_token;
}

/**
 * GET of a path (relative to the page) or of an absolute URL of this origin (a nextLink), as
 * JSON or, with `as: 'text'`, as text. A URL of another origin is refused before any request.
 */
export async function get(target, token, { as = 'json' } = {}) {
  const url = target instanceof URL ? target : urlOf(target);
  if (url.origin !== location.origin)
    throw new ApiError(0, { code: 'OtherOrigin', message: `The page follows links of this service only, not ${url.origin}.` });
  const response = await fetch(url, {
    headers: { Authorization: `Bearer ${token}`, Accept: as === 'json' ? 'application/json' : 'application/xml' },
    credentials: 'omit',
  });
  if (!response.ok) throw await failure(response);
  return as === 'json' ? response.json() : response.text();
}
