-- An older callgate derives the flow cookie's key from the OIDC client
-- secret again: sign-ins in flight when it starts are refused once
-- (start again from the login page).
DROP TABLE IF EXISTS deployment_keys;
