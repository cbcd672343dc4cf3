package secret

// Value is a secret given as it is (from the environment or a configuration file) or as a File. The zero
// Value holds no secret. Its String never shows the secret.
type Value struct {
	text string
	file *File
}

// Pick returns the secret of a setting pair: the file at path (named by setting) when path is not empty, else
// text as it is. A file wins: it is the form that rotates.
func Pick(text, setting, path string) Value {
	if path != "" {
		return Value{file: NewFile(setting, path)}
	}
	return Value{text: text}
}

// IsZero says no secret was given.
func (v Value) IsZero() bool { return v.file == nil && v.text == "" }

// File is the Value's file, nil when the secret was given as it is.
func (v Value) File() *File { return v.file }

// Get returns the secret: the text, or the file's current contents.
func (v Value) Get() (string, error) {
	if v.file != nil {
		return v.file.Text()
	}
	return v.text, nil
}

// String names the file, or says a secret is there, without showing it.
func (v Value) String() string {
	switch {
	case v.file != nil:
		return v.file.String()
	case v.text != "":
		return "(hidden)"
	}
	return ""
}

// GoString is String, so that %#v does not show the secret either.
func (v Value) GoString() string { return "secret.Value(" + v.String() + ")" }
