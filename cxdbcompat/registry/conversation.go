package registry

import _ "embed"

// ConversationBundleID is the id of ConversationBundle.
const ConversationBundleID = "cxdb-conversation-v3"

// ConversationBundle is the registry bundle of the canonical conversation
// types the official CXDB clients write (cxdb.ConversationItem v3 and the
// types it references), in the accepted bundle format. The load generators
// and the sample loader publish it; tests use it as a realistic bundle.
//
//go:embed conversation_bundle.json
var ConversationBundle []byte
