// The verification page's script: runs the WebAuthn ceremony in the browser (SimpleWebAuthnBrowser, served from
// this server) and shows the server's answer. Every POST carries the page's CSRF token in a header.
(() => {
  const main = document.getElementById('main');
  const status = document.getElementById('status');
  if (!main || !status) return;
  const { base, mode } = main.dataset;
  // Replaced when a proof renews the page's session (a new cookie and a new token).
  let csrf = main.dataset.csrf;
  const webauthn = window.SimpleWebAuthnBrowser;

  const post = async (path, body) => {
    const res = await fetch(base + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
      body: JSON.stringify(body ?? {}),
      credentials: 'same-origin',
    });
    const answer = await res.json();
    if (!res.ok || answer.title) throw answer;
    return answer;
  };

  // Shows the server's outcome in place of the page: its title and one line, as text.
  const show = (outcome) => {
    main.replaceChildren();
    const h1 = document.createElement('h1');
    h1.textContent = outcome.title || 'Something went wrong';
    const p = document.createElement('p');
    p.id = 'outcome';
    p.className = outcome.tone || 'refused';
    p.dataset.tone = outcome.tone || 'refused';
    p.textContent = outcome.text || 'The page could not finish; nothing was counted. Open the link again.';
    main.append(h1, p);
  };

  const assert = async (prefix) => {
    const optionsJSON = await post(`${prefix}-options`);
    const response = await webauthn.startAuthentication({ optionsJSON });
    return post(prefix, { response });
  };

  const run = async (button, steps) => {
    button.disabled = true;
    status.textContent = 'Waiting for your passkey…';
    try {
      show(await steps());
    } catch (error) {
      // A refusal from the server is an outcome; a ceremony the person cancelled leaves the page to try again.
      if (error && typeof error === 'object' && 'title' in error) show(error);
      else {
        status.textContent =
          'The passkey did not answer (cancelled or timed out). Nothing was counted; try again.';
        button.disabled = false;
      }
    }
  };

  const passkey = document.getElementById('passkey');
  if (mode === 'approve' && passkey)
    passkey.addEventListener('click', () => run(passkey, () => assert('/passkey')));

  const register = document.getElementById('register');
  if (mode === 'register' && register)
    register.addEventListener('click', () =>
      run(register, async () => {
        if (main.dataset.existing !== '0') {
          const proof = await assert('/proof');
          if (proof.csrf) csrf = proof.csrf;
        }
        const optionsJSON = await post('/register-options');
        const response = await webauthn.startRegistration({ optionsJSON });
        return post('/register', { response });
      }),
    );
})();
